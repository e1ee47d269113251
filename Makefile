# Thin wrapper over CMake. `make demo` and `make test` install what is missing, build in Release,
# then run the main job or every test.
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: all build demo test bench clean deps deps-python deps-bench

all: build

deps:
	@scripts/setup.sh

deps-python:
	@scripts/setup.sh --python

deps-bench:
	@scripts/setup.sh --bench

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/gmlp train --preset fmnist-s --out runs/demo

test: deps-python build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# gmlp beside PyTorch (eager, compile, bf16 autocast, ONNX Runtime) on every benchmark shape;
# e.g. make bench BENCH_ARGS="--quick --shapes fmnist-s" (see bench/run_all.py --help)
bench: deps-bench build
	python3 bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
