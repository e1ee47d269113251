#!/usr/bin/env bash
# gmlp as another project's dependency.
#   tests/package_test.sh installed BUILD WORK   installs BUILD into WORK/prefix, trains a small
#       model with the installed CLI, builds examples/classify.cpp against the installed package
#       with CMake (find_package) and with pkg-config, and checks both classify a Fashion-MNIST
#       image as the CLI does.
#   tests/package_test.sh subproject BUILD WORK  configures a project that adds gmlp's sources
#       with add_subdirectory while GoogleTest and CLI11 cannot be found, and checks that only the
#       library came in and that -march=native stayed on gmlp's own targets.
# CMAKE, CXX and GMLP_VERSION come from ctest (tests/CMakeLists.txt).
set -uo pipefail
MODE=$1
BUILD=$2
WORK=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
CMAKE=${CMAKE:-cmake}
CXX=${CXX:-c++}
DATA=/usr/share/datasets/fashion-mnist
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
ok() { echo "ok    $1"; }
bad() { echo "FAIL  $1"; failures=$((failures + 1)); }
# run LOG command...: runs it with its output in WORK/LOG, shown when it fails.
run() {
  local log=$WORK/$1
  shift
  "$@" >"$log" 2>&1 && return 0
  echo "--- $* failed:"
  tail -20 "$log"
  return 1
}

# march_native DIR: whether the Makefile build in DIR compiles with -march=native.
march_native() { grep -q -- "-march=native" "$1/flags.make"; }

if [ "$MODE" = subproject ]; then
  if run configure.log "$CMAKE" -S "$SRC/tests/package" -B "$WORK/build" -G "Unix Makefiles" \
       -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX" -DGMLP_SOURCE_DIR="$SRC" \
       -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON; then
    ok "a subproject configures without GoogleTest and CLI11"
  else
    bad "subproject configure"
  fi
  listing=$(cat "$WORK/build/gmlp_targets.txt" 2>/dev/null)
  targets=$(sed -n 's/^targets: //p' <<<"$listing" | tr ';' ' ')
  if [[ " $targets " == *" gmlp_lib "* && " $targets " != *" gmlp "* &&
        " $targets " != *" classify "* && "$listing" != *tests* ]]; then
    ok "the subproject brings the library only: $targets"
  else
    bad "the subproject defines more than the library: $listing"
  fi
  if march_native "$WORK/build/gmlp/CMakeFiles/gmlp_lib.dir" && ! march_native "$WORK/build/CMakeFiles/classify.dir"; then
    ok "-march=native on gmlp's library only, not on the parent's targets"
  else
    bad "-march=native leaks into the parent project, or is missing from gmlp's library"
  fi
  [ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
  exit $((failures > 0))
fi

[ "$MODE" = installed ] || { echo "usage: $0 installed|subproject BUILD WORK" >&2; exit 2; }
PREFIX=$WORK/prefix
if run install.log "$CMAKE" --install "$BUILD" --prefix "$PREFIX"; then
  ok "cmake --install into a fresh prefix"
else
  bad "cmake --install"
fi
LIBDIR=$(dirname "$(find "$PREFIX" -name gmlp.pc)")/..
missing=""
for f in include/gmlp/classifier.h include/gmlp/fill_mask.h include/gmlp/text_classifier.h include/gmlp/version.h bin/gmlp; do
  [ -e "$PREFIX/$f" ] || missing+=" $f"
done
for f in libgmlp.a cmake/gmlp/gmlpConfig.cmake cmake/gmlp/gmlpConfigVersion.cmake \
         cmake/gmlp/gmlpTargets.cmake cmake/gmlp/gmlpDependencies.cmake pkgconfig/gmlp.pc; do
  [ -e "$LIBDIR/$f" ] || missing+=" lib/$f"
done
headers=$(cd "$PREFIX/include" && find . -type f | sort | tr '\n' ' ')
if [ -z "$missing" ] && [ "$headers" = "./gmlp/classifier.h ./gmlp/fill_mask.h ./gmlp/text_classifier.h ./gmlp/version.h " ]; then
  ok "installed: headers (the public ones only), library, CMake package, pkg-config file, CLI"
else
  bad "install is missing$missing; installed headers: $headers"
fi

# A short run of the installed CLI: 1,000 images, one epoch, the smallest preset (a few seconds).
if run train.log "$PREFIX/bin/gmlp" train --preset fmnist-ti --train-limit 1000 --epochs 1 \
     --batch-size 100 --seed 3 --threads 2 --out "$WORK/run"; then
  ok "the installed gmlp trains"
else
  bad "the installed gmlp train"
fi
CK=$WORK/run/checkpoint.safetensors

# The first Fashion-MNIST test image, an ankle boot, as a binary PGM (stb_image reads it like a
# PNG): the 28×28 bytes after the IDX file's 16-byte header.
IMG=$WORK/boot.pgm
{ printf 'P5\n28 28\n255\n'; gzip -dc "$DATA/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c 784; } >"$IMG"

# check_classify NAME OUTPUT: OUTPUT is "IMG: <class> (<p> %)" and agrees with the CLI's top class.
expected=$("$PREFIX/bin/gmlp" predict --checkpoint "$CK" --top 1 "$IMG" 2>&1)
check_classify() {
  local name=$1 out=$2
  local re="^$IMG: ([A-Za-z/ -]+) \(([0-9.]+) %\)$"
  if [[ ! "$out" =~ $re ]]; then
    bad "$name: expected '$IMG: <class> (<p> %)', found '$out'"
    return
  fi
  local cls=${BASH_REMATCH[1]} p=${BASH_REMATCH[2]}
  # The CLI prints "IMG: <class> <probability>"; the two round the same number.
  if [[ "$expected" == "$IMG: $cls "* ]] &&
     awk -v p="$p" -v q="${expected##* }" 'BEGIN { exit !(p >= 10 && p <= 100 && (p - 100 * q) ^ 2 < 0.01) }'; then
    ok "$name: $cls ($p %), as gmlp predict"
  else
    bad "$name: '$out' against gmlp predict's '$expected'"
  fi
}

# CMake: find_package(gmlp CONFIG) against the prefix, none of gmlp's compile flags inherited.
if run cmake_consumer.log "$CMAKE" -S "$SRC/tests/package" -B "$WORK/consumer" -G "Unix Makefiles" \
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_PREFIX_PATH="$PREFIX" \
     -DGMLP_VERSION_WANTED="${GMLP_VERSION:-}" &&
   run cmake_consumer_build.log "$CMAKE" --build "$WORK/consumer" -j 2; then
  ok "find_package(gmlp ${GMLP_VERSION:-} CONFIG) and gmlp::gmlp build examples/classify.cpp"
  march_native "$WORK/consumer/CMakeFiles/classify.dir" && bad "-march=native reached the consumer"
  check_classify "classify (CMake)" "$("$WORK/consumer/classify" "$CK" "$IMG" 2>&1)"
else
  bad "the CMake consumer does not build"
fi

# pkg-config, static: the flags the .pc file gives are all a link needs.
if flags=$(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs --static gmlp 2>"$WORK/pkg-config.log") &&
   run pkg_config_build.log "$CXX" -std=c++17 -O2 "$SRC/examples/classify.cpp" -o "$WORK/classify_pc" $flags; then
  ok "pkg-config --cflags --libs --static gmlp builds examples/classify.cpp"
  check_classify "classify (pkg-config)" "$("$WORK/classify_pc" "$CK" "$IMG" 2>&1)"
else
  bad "the pkg-config consumer does not build ($(cat "$WORK/pkg-config.log"))"
fi

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
exit $((failures > 0))
