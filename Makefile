# Thin wrapper over CMake. `make demo` and `make test` install what is missing (Debian packages;
# for the tests, PyPI packages into .venv/), build in Release, then run the main job or every test.
#
#   make build     configure (once) and build the library, the gmlp CLI, the example, the tests
#   make demo      build, then train gMLP on Fashion-MNIST for 4 epochs (about 91 %) into runs/demo/,
#                  in bf16 on a CPU with AMX (--precision auto), else in fp32
#   make test      build, then run every test (ctest) with the Python of .venv/
#   make bench     build, then gmlp beside PyTorch and ONNX Runtime (bench/run_all.py, .venv/)
#   make speedrun  build, then time fmnist-s to 90 % and 93 % test accuracy, gmlp beside PyTorch
#                  with the same model and recipe (bench/speedrun.py; SPEEDRUN_ARGS)
#   make bench-ops build and run the per-op benchmark (bench/ops_bench.cpp): each op forward and
#                  backward, fast and _ref, 1 and 2 threads, at the presets' shapes; the median
#                  and spread of BENCH_OPS_REPS (default 5) repetitions, after the commit and CPU;
#                  BENCH_OPS_ARGS passes Google Benchmark flags (docs/benchmarks.md)
#   make bench-brgemm   gmlp's bf16 product beside oneDNN's brgemm microkernel (the torch of
#                  .venv/), the presets' channel products on one thread (bench/brgemm_bench.cpp; AMX)
#   make install   install into PREFIX (default /usr/local): headers, library, CMake package,
#                  pkg-config file, CLI
#   make test-sanitize   build with AddressSanitizer and UndefinedBehaviorSanitizer in
#                  SANITIZE_BUILD (default build-asan) and run the unit tests and the CLI test
#   make fuzz      build the libFuzzer harnesses (clang-14, ASan + UBSan) in FUZZ_BUILD (default
#                  build-fuzz), then run each for FUZZ_SECONDS (default 60) over its corpus and
#                  print runs, coverage and findings per harness
#   make build-onednn3   build gmlp and the per-op benchmark in ONEDNN3_BUILD (default
#                  build-onednn3) against oneDNN 3.2 from PyPI instead of Debian's 2.6.3
#                  (scripts/fetch_onednn.py), to measure one against the other: oneDNN runs bf16
#                  on AMX (gmlp bench --precision bf16 --bf16-engine onednn; docs/design.md)
#   make deps | deps-python | deps-bench   only the set-up (scripts/setup.sh)
#   make format    apply .clang-format to every C++ file (make test checks it)
#   make tidy      clang-tidy (.clang-tidy's checks: bug-prone patterns, performance, the static
#                  analyzer) over all of gmlp's C++ (src/, tools/, include/, tests/, bench/,
#                  examples/), or the paths TIDY_FILES matches (a regular expression); a finding
#                  fails it. About 30 minutes on 2 cores
#   make clean     remove the build folder
#   make help      this list
#
# BUILD (default build), JOBS (default: all cores) and CMAKE_ARGS (extra configure options, e.g.
# -DGMLP_NATIVE=OFF; they apply when BUILD is first configured) may be set on the command line.
BUILD      ?= build
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
CMAKE_ARGS ?=
SANITIZE_BUILD ?= build-asan
FUZZ_BUILD     ?= build-fuzz
FUZZ_SECONDS   ?= 60
ONEDNN3_BUILD  ?= build-onednn3
TIDY_FILES     ?= $(CURDIR)/(src|tools|include|tests|bench|examples)/
VENV_PYTHON := $(CURDIR)/.venv/bin/python
# ccache, when installed, makes rebuilds after a checkout or a clean nearly free.
CCACHE := $(if $(shell command -v ccache 2>/dev/null),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all help format tidy build demo test test-sanitize fuzz bench install clean deps deps-python deps-bench build-onednn3

all: build

help:
	@sed -n '/^#   make/,/^#$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@scripts/setup.sh

deps-python:
	@scripts/setup.sh --python

deps-bench:
	@scripts/setup.sh --bench

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGMLP_PYTHON=$(VENV_PYTHON) $(CCACHE) $(CMAKE_ARGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

# The same build against oneDNN 3.2 (PyPI's onednn-cpu-gomp, unpacked into ONEDNN3_BUILD/onednn
# by the venv's pip): CMake finds it there before Debian's, and the binaries' RPATH points at it.
build-onednn3: deps deps-python
	@$(VENV_PYTHON) scripts/fetch_onednn.py $(ONEDNN3_BUILD)/onednn
	@[ -f $(ONEDNN3_BUILD)/CMakeCache.txt ] || cmake -S . -B $(ONEDNN3_BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH=$(CURDIR)/$(ONEDNN3_BUILD)/onednn -DGMLP_PYTHON=$(VENV_PYTHON) $(CCACHE) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ONEDNN3_BUILD) -j $(JOBS) --target gmlp gmlp_ops_bench
	@$(ONEDNN3_BUILD)/gmlp --version | grep -i onednn

# The short recipe: no augmentation and no label smoothing, which pay back only over longer
# schedules, and batch 64 for twice the steps an epoch (bench/speedrun.py --recipe demo). The
# precision is the CPU's: bf16 where it has AMX, which trains the demo 2.2× as fast to the same
# accuracy (docs/experiments.md), fp32 elsewhere.
DEMO_RECIPE := --batch-size 64 --crop-padding 0 --no-hflip --label-smoothing 0
demo: build
	$(BUILD)/gmlp train --preset fmnist-s --epochs 4 $(DEMO_RECIPE) --precision auto --out runs/demo --overwrite

# A build folder configured with another Python for the tests is pointed at the venv's.
test: deps-python build
	@grep -q '^GMLP_PYTHON:[A-Z]*=$(VENV_PYTHON)$$' $(BUILD)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD) -DGMLP_PYTHON=$(VENV_PYTHON) >/dev/null
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The unit tests and the CLI test under ASan + UBSan (RelWithDebInfo, so reports have line numbers);
# a finding fails its test. Left out: the package tests (an application built against the installed
# library would need the sanitizers' runtime too), interop_timm and docs (Python checks that
# exercise no more of gmlp's own code).
SANITIZE_SKIP := ^(package_.*|interop_timm|docs)$$
test-sanitize: deps-python
	@[ -f $(SANITIZE_BUILD)/CMakeCache.txt ] || cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DGMLP_SANITIZE=address,undefined -DGMLP_PYTHON=$(VENV_PYTHON) $(CCACHE) >/dev/null
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIP)'

# The harnesses of fuzz/ over their corpora in $(FUZZ_BUILD)/fuzz/corpus/, which grow from run to run;
# the seeds (fuzz/make_corpus.py) are written once: delete $(FUZZ_BUILD)/fuzz/seeds to remake them.
# make fuzz FUZZ_ARGS="--only fuzz_image" runs one (fuzz/run_fuzzers.py --help).
$(FUZZ_BUILD)/CMakeCache.txt:
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 -DGMLP_FUZZ=ON \
	  -DGMLP_BUILD_TESTS=OFF -DGMLP_BUILD_EXAMPLES=OFF -DGMLP_INSTALL=OFF $(CCACHE) >/dev/null

fuzz: deps-python $(FUZZ_BUILD)/CMakeCache.txt
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target gmlp fuzzers
	@[ -d $(FUZZ_BUILD)/fuzz/seeds ] || $(VENV_PYTHON) fuzz/make_corpus.py --gmlp $(FUZZ_BUILD)/gmlp --out $(FUZZ_BUILD)/fuzz/seeds
	$(VENV_PYTHON) fuzz/run_fuzzers.py --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS)

# gmlp beside PyTorch (eager, compile, bf16 autocast, ONNX Runtime) on every benchmark shape;
# e.g. make bench BENCH_ARGS="--quick --shapes fmnist-s" (see bench/run_all.py --help)
bench: deps-bench build
	$(VENV_PYTHON) bench/run_all.py --gmlp $(BUILD)/gmlp $(BENCH_ARGS)

# Time to accuracy (bench/speedrun.py): fmnist-s to 90 % and 93 % test accuracy with gmlp and with
# PyTorch (eager; bf16 autocast where the CPU has bf16), the same model and recipe, one after the
# other; e.g. make speedrun SPEEDRUN_ARGS="--targets 90 --epochs 6". Hours on 2 cores.
.PHONY: speedrun
speedrun: deps-python build
	$(VENV_PYTHON) bench/speedrun.py --gmlp $(BUILD)/gmlp $(SPEEDRUN_ARGS)

# Each op on its own (bench/ops_bench.cpp): Google Benchmark's mean, median and spread over
# BENCH_OPS_REPS repetitions of at least 0.05 s each. A regex with | or ( ) is quoted inside the
# variable: make bench-ops BENCH_OPS_ARGS="--benchmark_filter='/(fmnist-s|gmlp-ti16)/'" runs two
# shapes; build/gmlp_ops_bench --help lists the flags.
BENCH_OPS_REPS ?= 5
.PHONY: bench-ops
bench-ops: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS) --target gmlp_ops_bench
	@echo "commit: $$(git describe --always --dirty 2>/dev/null || echo unknown)"
	@echo "cpu: $$(lscpu | sed -n 's/^Model name: *//p')"
	@$(BUILD)/gmlp_ops_bench --benchmark_repetitions=$(BENCH_OPS_REPS) --benchmark_display_aggregates_only=true \
	  --benchmark_min_time=0.05 --benchmark_counters_tabular=true $(BENCH_OPS_ARGS)

# gmlp's bf16 product beside oneDNN's batch-reduce GEMM microkernel, as the torch of .venv/ bundles
# it (bench/brgemm_bench.cpp): the channel products of the presets, one thread, call by call, each
# as a share of AMX's peak. Needs a CPU with AMX; BENCH_BRGEMM_ARGS: --pairs N, --rows R.
.PHONY: bench-brgemm
bench-brgemm: deps deps-python $(BUILD)/CMakeCache.txt
	@cmake -S . -B $(BUILD) -DGMLP_TORCH_DIR=$$($(VENV_PYTHON) -c 'import os, torch; print(os.path.dirname(torch.__file__))') >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gmlp_brgemm_bench
	@echo "cpu: $$(lscpu | sed -n 's/^Model name: *//p')"
	@$(BUILD)/gmlp_brgemm_bench $(BENCH_BRGEMM_ARGS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@scripts/format.sh

# The build folder's compile_commands.json (CMake writes it at every configure) gives clang-tidy
# each file's flags.
tidy: deps $(BUILD)/CMakeCache.txt
	@scripts/setup.sh --tidy
	@cmake $(BUILD) >/dev/null
	run-clang-tidy-14 -p $(BUILD) -quiet -j $(JOBS) '$(TIDY_FILES)'

clean:
	rm -rf $(BUILD)
