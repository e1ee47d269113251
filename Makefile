# Thin wrapper over CMake. `make demo` and `make test` install what is missing (Debian packages;
# for the tests, PyPI packages into .venv/), build in Release, then run the main job or every test.
#
#   make build     configure (once) and build the library, the gmlp CLI, the example, the tests
#   make demo      build, then train gMLP on Fashion-MNIST into runs/demo/
#   make test      build, then run every test (ctest) with the Python of .venv/
#   make bench     build, then gmlp beside PyTorch and ONNX Runtime (bench/run_all.py, .venv/)
#   make bench-ops build and run the per-op benchmark (bench/ops_bench.cpp): each op forward and
#                  backward, fast and _ref, 1 and 2 threads, at the presets' shapes; the median
#                  and spread of BENCH_OPS_REPS (default 5) repetitions, after the commit and CPU;
#                  BENCH_OPS_ARGS passes Google Benchmark flags (docs/benchmarks.md)
#   make install   install into PREFIX (default /usr/local): headers, library, CMake package,
#                  pkg-config file, CLI
#   make deps | deps-python | deps-bench   only the set-up (scripts/setup.sh)
#   make clean     remove the build folder
#   make help      this list
#
# BUILD (default build), JOBS (default: all cores) and CMAKE_ARGS (extra configure options, e.g.
# -DGMLP_NATIVE=OFF; they apply when BUILD is first configured) may be set on the command line.
BUILD      ?= build
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
CMAKE_ARGS ?=
VENV_PYTHON := $(CURDIR)/.venv/bin/python
# ccache, when installed, makes rebuilds after a checkout or a clean nearly free.
CCACHE := $(if $(shell command -v ccache 2>/dev/null),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all help build demo test bench install clean deps deps-python deps-bench

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

demo: build
	$(BUILD)/gmlp train --preset fmnist-s --out runs/demo --overwrite

# A build folder configured with another Python for the tests is pointed at the venv's.
test: deps-python build
	@grep -q '^GMLP_PYTHON:[A-Z]*=$(VENV_PYTHON)$$' $(BUILD)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD) -DGMLP_PYTHON=$(VENV_PYTHON) >/dev/null
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# gmlp beside PyTorch (eager, compile, bf16 autocast, ONNX Runtime) on every benchmark shape;
# e.g. make bench BENCH_ARGS="--quick --shapes fmnist-s" (see bench/run_all.py --help)
bench: deps-bench build
	$(VENV_PYTHON) bench/run_all.py --gmlp $(BUILD)/gmlp $(BENCH_ARGS)

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

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
