# Single entry point. Every target installs what it needs on a fresh machine
# (Debian packages when run as root, Python packages into .venv/), idempotently.
#   make test      build everything and run every test suite
#   make test-ops  every float32 sample of every op_db op on npu against CPU
#                  (tests/python/test_opdb.py; CI runs the first sample of each)
#   make demo      run the main example
#   make bench     run the benchmarks
#   make sanitize  ASan+UBSan and TSan builds of the runtime with its tests, TSan
#                  build of the core with its tests, ASan+UBSan build of everything
#                  with the core tests and the CI subset of the Python suite
#   make sanitize-full  the same with the whole Python suite under ASan+UBSan
#   make fuzz      libFuzzer runs of the npurt C API and of stream-id unpacking
#                  (FUZZ_SECONDS in total, default 120)
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
CMAKE := $(VENV)/bin/cmake
BUILD := build
BUILD_TYPE ?= RelWithDebInfo
DEPS_STAMP := $(VENV)/.deps-stamp
# npurt_bench: 5 repetitions of every benchmark, in random order, summarised
# by their medians. On a 2-vCPU VM the cost of a benchmark drifts with the
# placement of its threads from one run to the next; interleaving spreads
# that drift over ours and the baseline alike (docs/PERFORMANCE.md).
NPURT_BENCH_FLAGS ?= --benchmark_min_time=0.1s --benchmark_repetitions=5 \
	--benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true

# test-ops: about 4 minutes on 2 vCPUs; the timeout bounds a hang or a slow
# machine (each test also has pytest.ini's own limit).
OPS_TIMEOUT ?= 1200

.PHONY: all deps build install test test-cpp test-python test-ops bench demo sanitize sanitize-full fuzz clean

all: build

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): requirements-dev.txt scripts/install_system_deps.sh | $(VPY)
	scripts/install_system_deps.sh
	$(VPY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

deps: $(DEPS_STAMP)

$(BUILD)/build.ninja: CMakeLists.txt | $(DEPS_STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(CMAKE) -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$(CURDIR)/$(VPY)

build: $(DEPS_STAMP) $(BUILD)/build.ninja
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(CMAKE) --build $(BUILD)

test-cpp: build
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ctest --test-dir $(BUILD) --output-on-failure --timeout 300

test-python: build
	PYTHONPATH=$(CURDIR) $(VPY) -m pytest tests/python -q -p no:cacheprovider

test: test-cpp test-python

test-ops: build
	NPU_OPDB_SAMPLES=all PYTHONPATH=$(CURDIR) timeout $(OPS_TIMEOUT) \
		$(VPY) -m pytest tests/python/test_opdb.py -q -p no:cacheprovider

# Editable install into .venv (the tests use the tree directly instead).
install: build
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

bench: build
	$(BUILD)/benchmarks/npurt_bench $(NPURT_BENCH_FLAGS)
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_torch.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_graphs.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_streams.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_distributed.py

demo: build
	$(BUILD)/examples/npurt_demo $(BUILD)/npurt_demo.trace.json
	PYTHONPATH=$(CURDIR) $(VPY) examples/train_two_streams.py
	PYTHONPATH=$(CURDIR) $(VPY) examples/interop/interop.py

sanitize: $(DEPS_STAMP)
	scripts/sanitize.sh ci

sanitize-full: $(DEPS_STAMP)
	scripts/sanitize.sh full

# Installs clang (as root) if missing; FUZZ_SECONDS bounds the run.
fuzz: $(DEPS_STAMP)
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),120) scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
