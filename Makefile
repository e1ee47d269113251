# Thin wrapper over CMake. `make demo` and `make test` install what is missing, build in Release,
# then run the main job or every test.
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: all build demo test bench clean deps deps-python

all: build

deps:
	@scripts/setup.sh

deps-python:
	@scripts/setup.sh --python

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/gmlp train --preset fmnist-demo --out runs/demo

test: deps-python build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
