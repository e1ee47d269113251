#!/usr/bin/env bash
# make test's smoke run of the libFuzzer harnesses (ctest -R fuzz_smoke): builds them with
# clang-14 (libFuzzer, ASan, UBSan) at -O0 in a build folder of their own (seconds of fuzzing gain
# nothing from -O1's faster harnesses, and -O0 halves the build, which is most of the run), writes
# the seed corpora, and runs each for FUZZ_SMOKE_SECONDS (default 5) from its seeds. clang-14 with
# its libFuzzer and OpenMP runtimes is part of the tests' set-up (scripts/setup.sh --python):
# without it, this fails.
# The seed checkpoints are trained by GMLP, the tested build's own binary: they are files such as
# any gmlp writes, and the uninstrumented binary trains them in a fraction of the time.
#   fuzz/smoke.sh SOURCE_DIR BUILD_DIR PYTHON GMLP [COMPILER_LAUNCHER]
set -euo pipefail
SRC=$1
BUILD=$2
PYTHON=$3
GMLP=$4
LAUNCHER=${5:-}
CXX=${GMLP_FUZZ_CXX:-clang++-14}
mkdir -p "$BUILD"

# What make fuzz needs, tried on a one-line harness.
probe="$BUILD/probe"
if ! command -v "$CXX" >/dev/null; then
  echo "fuzz_smoke: $CXX is not installed (scripts/setup.sh --python installs it)"
  exit 1
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     "$CXX" -x c++ -fsanitize=fuzzer,address,undefined -fopenmp - -o "$probe" 2>"$probe.log"; then
  echo "fuzz_smoke: $CXX cannot build a libFuzzer harness with OpenMP ($(head -c 300 "$probe.log"));" \
       "scripts/setup.sh --python installs libclang-rt-14-dev and libomp-14-dev"
  exit 1
fi

cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX" -DGMLP_FUZZ=ON -DGMLP_FUZZ_OPT=-O0 \
  -DGMLP_BUILD_TESTS=OFF -DGMLP_BUILD_EXAMPLES=OFF -DGMLP_INSTALL=OFF \
  ${LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER="$LAUNCHER"} >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target fuzzers
[ -d "$BUILD/fuzz/seeds" ] || "$PYTHON" "$SRC/fuzz/make_corpus.py" --gmlp "$GMLP" --out "$BUILD/fuzz/seeds"
# A fresh corpus each time: the smoke run starts from the seeds alone.
rm -rf "$BUILD/fuzz/smoke_corpus"
"$PYTHON" "$SRC/fuzz/run_fuzzers.py" --build "$BUILD" --seconds "${FUZZ_SMOKE_SECONDS:-5}" \
  --corpus "$BUILD/fuzz/smoke_corpus"
