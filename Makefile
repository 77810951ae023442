# Single entry point. Every target installs what it needs on a fresh machine
# (Debian packages when run as root, Python packages into .venv/), idempotently.
#   make test      build everything and run every test suite
#   make test-ops  every float32 sample of every op_db op on npu against CPU
#                  (tests/python/test_opdb.py; CI runs the first sample of each)
#   make test-compile  torch.compile's default backend (Inductor) on npu
#                  (tests/python/test_compile_inductor.py: it compiles C++;
#                  eager/aot_eager are in make test)
#   make test-racecheck  the Python suite's cross-stream files with npurt's
#                  device race detector on (NPU_SIM_RACECHECK=1); fails on any
#                  race report (RACECHECK_TESTS=tests/python: all of it)
#   make demo      run the main example
#   make bench     run the benchmarks
#   make sanitize  ASan+UBSan and TSan builds of the runtime with its tests, TSan
#                  build of the core with its tests, ASan+UBSan build of everything
#                  with the core tests and the CI subset of the Python suite
#   make sanitize-full  the same with the whole Python suite under ASan+UBSan
#   make fuzz      libFuzzer runs of the npurt C API and of stream-id unpacking
#                  (FUZZ_SECONDS in total, default 120)
#   make test-packaging  the committed HEAD as a wheel, installed with torch into
#                  a fresh venv with the source and build trees gone: an op,
#                  ExternalStream, examples/interop built with NpuExtension
#                  (scripts/test_packaging.sh; CI runs it)
#   make wheel     the wheel, in dist/
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

# test-packaging: a clean build of the backend (about 5 minutes on 2 idle
# vCPUs, docs/BUILD.md; much less with ccache warm), a venv with torch (about
# 30 s) and one extension (about 1 minute); measured figures in docs/BUILD.md.
# The timeout bounds a hang or a slow machine.
PACKAGING_TIMEOUT ?= 1200

# test-ops: about 4 minutes on 2 vCPUs; the timeout bounds a hang or a slow
# machine (each test also has pytest.ini's own limit).
OPS_TIMEOUT ?= 1200

# test-compile: about 1 minute on 2 vCPUs with Inductor's cache warm, up to
# 3 cold (each graph is C++ compiled); the timeout bounds a hang or a slow
# machine (each test also has its own limit).
COMPILE_TIMEOUT ?= 900

# test-racecheck: the Python suite's files that order work across streams
# (streams, events, external streams, graphs, host callbacks, threads,
# record_stream, collectives, models and autograd across streams) once more,
# with every task checked. Left out, for CI's time budget: files whose work
# stays on one stream or one thread (op_db, meta kernels, bad inputs, device
# functions, allocator statistics) and those that mostly start subprocesses
# with other settings (task-queue modes, faults, op crashes, device counts).
# `make test-racecheck RACECHECK_TESTS=tests/python` runs everything.
# The timeout bounds a hang or a slow machine.
RACECHECK_TESTS ?= $(addprefix tests/python/,test_streams_events.py test_stream_api.py \
	test_event_api.py test_external_stream.py test_graphs.py test_graph_replay_args.py test_host_callbacks.py \
	test_threads.py test_memory.py test_reliability.py test_copy.py test_ops.py \
	test_models.py test_rnn.py test_convolution.py test_autograd.py test_random.py test_amp.py \
	test_distributed.py test_profiler.py test_memory_history.py test_sanitizer.py \
	test_racecheck.py test_sdk.py test_host_sync.py test_task_arguments.py test_sparse.py \
	test_compile_npugraphs.py)
RACECHECK_TIMEOUT ?= 1200

# Note [Shared compiler cache]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# CI builds the backend's translation units twice with the same flags: here
# in build/ and again in the packaging test's wheel build
# (build-packaging/src/build-wheel/, scripts/test_packaging.sh). With ccache
# installed (CMakeLists.txt uses it when found), the second build is served
# from the first one's objects if the two compile commands are the same text:
# paths relative to this directory (CCACHE_BASEDIR), the working directory not
# hashed (CCACHE_NOHASHDIR; the price is that the debug information of a
# reused object names the directory that built it first), and torch's headers
# reached through the same relative path (the packaging clone gets a .venv
# link). Settings of the caller's own environment win.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps build install wheel test test-cpp test-python test-ops test-compile test-packaging test-racecheck bench demo sanitize sanitize-full fuzz clean

all: build

$(VPY):
	$(PYTHON) -m venv $(VENV)

# pip --no-compile: byte-compiling torch's modules at install took minutes on
# 2 vCPUs; Python compiles what a process imports, once, when it imports it.
$(DEPS_STAMP): requirements-dev.txt scripts/install_system_deps.sh | $(VPY)
	scripts/install_system_deps.sh
	$(VPY) -m pip install -q --disable-pip-version-check --no-compile -r requirements-dev.txt
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

test-compile: build
	NPU_TEST_INDUCTOR=1 PYTHONPATH=$(CURDIR) timeout $(COMPILE_TIMEOUT) \
		$(VPY) -m pytest tests/python/test_compile_inductor.py -q -p no:cacheprovider --timeout 600

# Tests marked racy (they race on purpose) are skipped; any other test that
# makes npurt report a race fails (tests/python/conftest.py).
test-racecheck: build
	NPU_SIM_RACECHECK=1 PYTHONPATH=$(CURDIR) timeout $(RACECHECK_TIMEOUT) \
		$(VPY) -m pytest $(RACECHECK_TESTS) -q -p no:cacheprovider

# Editable install into .venv (the tests use the tree directly instead).
install: build
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

# A relocatable wheel (Note [Relocatable package] in CMakeLists.txt), built in
# build-wheel/.
wheel: $(DEPS_STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VPY) -m pip wheel -q --no-build-isolation --no-deps -w dist .

test-packaging: $(DEPS_STAMP)
	timeout $(PACKAGING_TIMEOUT) scripts/test_packaging.sh

bench: build
	$(BUILD)/benchmarks/npurt_bench $(NPURT_BENCH_FLAGS)
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_torch.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_graphs.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_debugging.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_streams.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_sanitizer.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_optim.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_racecheck.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_distributed.py
	PYTHONPATH=$(CURDIR) $(VPY) benchmarks/bench_expandable.py

demo: build
	$(BUILD)/examples/npurt_demo $(BUILD)/npurt_demo.trace.json
	PYTHONPATH=$(CURDIR) $(VPY) examples/train_two_streams.py
	cd examples/interop && PYTHONPATH=$(CURDIR) $(CURDIR)/$(VPY) setup.py -q build_ext --inplace >/dev/null
	cd examples/interop && PYTHONPATH=$(CURDIR) $(CURDIR)/$(VPY) interop.py

sanitize: $(DEPS_STAMP)
	scripts/sanitize.sh ci

sanitize-full: $(DEPS_STAMP)
	scripts/sanitize.sh full

# Installs clang (as root) if missing; FUZZ_SECONDS bounds the run.
fuzz: $(DEPS_STAMP)
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),120) scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz $(BUILD)-wheel $(BUILD)-packaging dist
