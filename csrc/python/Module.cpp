// torch_npu._C — the Python binding of the npu backend.
//
// Layer: binding. The only translation unit that includes pybind11 and
// torch/csrc headers. Functions that wait release the GIL. Streams cross the
// boundary as (stream_id, device_index, device_type) triples, validated by
// NPUStream::unpack3. Every function is thread-safe.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "aten/AsyncFallback.h"
#include "aten/OpLauncher.h"
#include "aten/MetaFunctions.h"
#include "aten/OpPlan.h"
#include "aten/ResultPlacement.h"
#include "core/ExternalStreams.h"
#include "core/HostSync.h"
#include "core/NPUAllocatorConfig.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUGenerator.h"
#include "core/NPUStream.h"
#include "core/NpuVariables.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.h"
#include "python/Init.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

using Triple = std::tuple<int64_t, int64_t, int64_t>;

Triple pack(const NPUStream& s) {
  return {s.id(), static_cast<int64_t>(s.device_index()), static_cast<int64_t>(s.device_type())};
}

NPUStream unpack(int64_t stream_id, int64_t device_index, int64_t device_type) {
  TORCH_CHECK(device_index >= -1 && device_index < 128, "Invalid device_index: ", device_index,
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(device_type >= 0 && device_type < static_cast<int64_t>(
                                                    c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES),
              "Invalid device_type: ", device_type, NPU_ERROR_SUFFIX);
  return NPUStream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device_index),
                            static_cast<c10::DeviceType>(device_type));
}

// Gates for tests: a task that holds its stream until released. This is how
// the tests prove that ops run on the device later, not on the calling thread,
// without sleeping. See tests/python/test_ops.py.
struct Gates {
  std::mutex mutex;
  int64_t next = 1;
  std::unordered_map<int64_t, std::shared_ptr<std::promise<void>>> open;
};

Gates& gates() {
  static auto* g = std::make_unique<Gates>().release();  // leaked: used by executors at exit
  return *g;
}

int64_t blockStream(int64_t id, int64_t idx, int64_t type) {
  NPUStream s = unpack(id, idx, type);
  auto promise = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = promise->get_future().share();
  int64_t handle = 0;
  {
    std::lock_guard<std::mutex> lock(gates().mutex);
    handle = gates().next++;
    gates().open.emplace(handle, promise);
  }
  aten::launchKernel(s, "testing::gate", [released] { released.wait(); });
  return handle;
}

void releaseGate(int64_t handle) {
  std::shared_ptr<std::promise<void>> promise;
  {
    std::lock_guard<std::mutex> lock(gates().mutex);
    auto it = gates().open.find(handle);
    TORCH_CHECK(it != gates().open.end(), "Unknown or already released gate handle ", handle,
                NPU_ERROR_SUFFIX);
    promise = it->second;
    gates().open.erase(it);
  }
  promise->set_value();
}

// Intra-op thread count a kernel queued on the stream sees (tests of
// set_stream_limit). Waits for the stream.
int kernelThreads(int64_t id, int64_t idx, int64_t type) {
  NPUStream s = unpack(id, idx, type);
  auto seen = std::make_shared<std::atomic<int>>(-1);
  aten::launchKernel(s, "testing::kernel_threads", [seen] { *seen = at::get_num_threads(); });
  py::gil_scoped_release nogil;
  waitForHostRead(s);
  return seen->load();
}

// Note [Sleep cycles]
// torch.cuda._sleep spins for a number of GPU clock cycles; tests calibrate it
// with get_cycles_per_ms() and use it to keep a stream busy. The simulated
// device has no clock, so one cycle is defined as one nanosecond of the
// executor sleeping (not spinning: the machine's cores are shared). The
// kernel holds its executor like a real kernel holds the device, so later
// work on the stream waits for it; get_cycles_per_ms() measures about 1e6.
constexpr int64_t kNanosecondsPerSleepCycle = 1;

std::atomic<bool> gInitialized{false};

// torch_npu._C._npu_init(): see Note [Configuration is validated at
// initialisation]. A plain CPython function rather than a pybind11 one, so
// that HANDLE_TH_ERRORS turns the STREAMS_PER_DEVICE warning into a Python
// warning. Returns the device count.
PyObject* npuInit(PyObject*, PyObject*) {
  HANDLE_TH_ERRORS
  checkNotInBadFork();  // Note [Fork]: the parent's initialisation is no use here
  ensureInitialized();
  return PyLong_FromLong(static_cast<long>(device_count()));
  END_HANDLE_TH_ERRORS
}

PyObject* npuIsInitialized(PyObject*, PyObject*) { return PyBool_FromLong(initialized() ? 1 : 0); }

PyMethodDef initMethods[] = {{"_npu_init", npuInit, METH_NOARGS, nullptr},
                             {"_npu_isInitialized", npuIsInitialized, METH_NOARGS, nullptr},
                             {nullptr, nullptr, 0, nullptr}};

}  // namespace

bool initialized() noexcept { return gInitialized.load(std::memory_order_acquire); }

void initializeSlow() {
  static std::mutex mutex;  // one thread validates; the others wait for its verdict
  std::lock_guard<std::mutex> lock(mutex);
  if (initialized()) return;
  // 1. The runtime: NPU_SIM_DEVICE_COUNT, _CORES, _MEMORY_MB, _TASK_DELAY_US.
  //    npurt parses them once and reports a bad one from every call as
  //    npuErrorInitializationError, with the variable, value and range in
  //    the last error message.
  int count = 0;
  const npuError_t status = npuGetDeviceCount(&count);
  if (status != npuSuccess) {
    std::string detail = npuGetLastErrorMessage();
    // npurt prefixes its message with the entry point's name; the user did
    // not call it, so say what failed instead.
    const std::string prefix = "npuGetDeviceCount: ";
    if (detail.compare(0, prefix.size(), prefix) == 0) detail.erase(0, prefix.size());
    TORCH_CHECK(false, "NPU initialisation failed: ", detail, " (", npuGetErrorName(status),
                "). Fix or unset the variable; README.md \"Configuration\" lists the "
                "accepted values.",
                NPU_ERROR_SUFFIX);
  }
  TORCH_CHECK(count > 0, "No NPU devices are available", NPU_ERROR_SUFFIX);
  // 2. The task queue: TASK_QUEUE_ENABLE, ASCEND_LAUNCH_BLOCKING,
  //    PER_STREAM_QUEUE (raises torch_npu's "TASK_QUEUE_ENABLE should be 0, 1
  //    or 2", ...).
  (void)queue::config();
  // 3. TORCH_NPU_EXTERNAL_STREAM_MODE (compat | full).
  (void)external::mode();
  // 4. STREAMS_PER_DEVICE: torch_npu warns and uses 32, so this warns too.
  (void)streamsPerPool();
  // 5. NPU_CPP_META (0 | 1).
  (void)aten::detail::cppMetaKernelsEnabled();
  // 6. PYTORCH_NPU_ALLOC_CONF / PYTORCH_ALLOC_CONF (a ValueError naming the
  //    option and value, as torch_npu's TORCH_CHECK_VALUE).
  (void)NPUCachingAllocator::allocatorConfig();
  gInitialized.store(true, std::memory_order_release);
}

void initModule(py::module_& m) {
  aten::detail::routeCompositeOpsToOpPath();  // every npu kernel is registered by now
  if (PyModule_AddFunctions(m.ptr(), initMethods) < 0) throw python_error();
  m.def("_testing_kernel_threads", &kernelThreads);
  m.def("_testing_block_stream", &blockStream);
  m.def("_testing_release", &releaseGate);
  // What the op path learnt about an op at run time (tests of the demotion
  // rules: Note [An out tensor the out kernel refused]).
  m.def("_testing_opPathState", [](const std::string& name, const std::string& overload) {
    const auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
    TORCH_CHECK(handle.has_value(), "no operator ", name, ".", overload, NPU_ERROR_SUFFIX);
    const aten::detail::OpInfo& info = aten::detail::opInfo(*handle);
    py::dict d;
    d["out_variant_broken"] = info.outVariantBroken.load();
    d["meta_untrusted"] = info.metaUntrusted.load();
    return d;
  });
  // Functional results computed in place of their outputs (Note [Results
  // computed in place of the output]).
  m.def("_testing_resultPlacement", [] {
    const aten::detail::PlacementCounts c = aten::detail::placementCounts();
    py::dict d;
    d["placed"] = c.placed;
    d["copied"] = c.copied;
    return d;
  });
  m.def("_npu_getDeviceCount", [] { return static_cast<int>(device_count()); });
  // Note [Device count before initialisation] in csrc/npurt/README.md: 0 if
  // the environment is invalid, as _npu_getDeviceCount.
  m.def("_npu_probeDeviceCount", [] {
    int count = 0;
    return npuProbeDeviceCount(&count) == npuSuccess ? count : 0;
  });
  // Note [Op execution timeout] in csrc/npurt/README.md; the Python side
  // checks the range (torch_npu.npu.set_op_timeout_ms).
  m.def("_npu_set_op_timeout_ms", [](uint32_t timeoutMs) {
    NPU_CHECK(npuSetOpExecuteTimeout(static_cast<uint64_t>(timeoutMs) * 1000));
  });
  m.def("_npu_get_op_timeout_ms", [] {
    uint64_t us = 0;
    NPU_CHECK(npuGetOpExecuteTimeout(&us));
    return us / 1000;
  });
  m.def("_npu_isInBadFork", [] { return inBadFork(); });
  m.def("_npu_getDevice", [] { return static_cast<int>(current_device()); });
  m.def("_npu_setDevice", [](int64_t d) { set_device(checkedDeviceIndex(d)); });
  m.def(
      "_npu_synchronize",
      [](int64_t d) {
        device_synchronize(checkedDeviceIndex(d));
        aten::detail::releaseDeferred();
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_npu_getDeviceProperties", [](int64_t d) {
    npuDeviceProp prop{};
    NPU_CHECK(npuGetDeviceProperties(&prop, static_cast<int>(checkedDeviceIndex(d))));
    return py::make_tuple(std::string(prop.name), prop.totalMemory, prop.coreCount);
  });
  // torch_npu's: the chip's SocVersion as an int (-1: the simulator names no
  // chip, Note [Simulated chip model]).
  m.def("_npu_get_soc_version", [] { return static_cast<int>(GetSocVersion()); });
  m.def("_npu_get_soc_name", [] { return GetSocName(); });

  m.def("_npu_getDeviceUtilizationRate", [](int64_t d) {
    unsigned percent = 0;
    NPU_CHECK(npuDeviceGetUtilization(static_cast<int>(checkedDeviceIndex(d)), &percent));
    return percent;
  });

  // Streams.
  m.def("_npu_getCurrentStream", [](int64_t d) { return pack(getCurrentNPUStream(d)); });
  m.def("_npu_getDefaultStream", [](int64_t d) { return pack(getDefaultNPUStream(d)); });
  m.def("_npu_getStreamFromPool",
        [](int priority, int64_t d) { return pack(getStreamFromPool(priority, d)); });
  m.def("_npu_getSyncLaunchStream",
        [](int64_t d) { return pack(getNPUStreamFromSyncLaunchPool(d)); });
  m.def("_npu_getStreamFromExternal", [](uint64_t ptr, int64_t d) {
    return pack(getStreamFromExternal(reinterpret_cast<npuStream_t>(ptr), d));
  });
  m.def("_npu_setStream", [](int64_t id, int64_t idx, int64_t type) {
    NPUStream s = unpack(id, idx, type);
    if (s.device_index() != current_device()) set_device(s.device_index());
    setCurrentNPUStream(s);
  });
  m.def("_npu_validateStream",
        [](int64_t id, int64_t idx, int64_t type) { return pack(unpack(id, idx, type)); });
  m.def("_npu_streamQuery", [](int64_t id, int64_t idx, int64_t type) {
    NPUStream s = unpack(id, idx, type);
    py::gil_scoped_release nogil;
    return s.query();
  });
  m.def("_npu_streamSynchronize", [](int64_t id, int64_t idx, int64_t type) {
    NPUStream s = unpack(id, idx, type);
    py::gil_scoped_release nogil;
    s.synchronize();
    aten::detail::releaseDeferred();
  });
  m.def("_npu_streamHandle", [](int64_t id, int64_t idx, int64_t type) {
    NPUStream s = unpack(id, idx, type);
    py::gil_scoped_release nogil;
    return reinterpret_cast<uint64_t>(s.stream());
  });
  // torch_npu._C._npu_getCurrentRawStream(device): the runtime handle of the
  // current stream as an integer, after draining the task queue (what another
  // library launching on the handle needs). The NoWait variant skips the
  // drain, as torch_npu's does, for callers that only compare handles.
  m.def("_npu_getCurrentRawStream", [](int64_t d) {
    NPUStream s = getCurrentNPUStream(checkedDeviceIndex(d));
    py::gil_scoped_release nogil;
    return reinterpret_cast<uint64_t>(s.stream());
  });
  m.def("_npu_getCurrentRawStreamNoWait", [](int64_t d) {
    return reinterpret_cast<uint64_t>(getCurrentNPUStream(checkedDeviceIndex(d)).rawHandle());
  });
  // torch_npu.npu._sleep(cycles): a kernel that keeps the current stream busy.
  // See Note [Sleep cycles].
  m.def("_npu_sleep", [](int64_t cycles) {
    TORCH_CHECK(cycles >= 0, "_sleep expects a non-negative number of cycles, but got ", cycles,
                NPU_ERROR_SUFFIX);
    aten::launchKernel(getCurrentNPUStream(), "npu::sleep", [cycles] {
      std::this_thread::sleep_for(std::chrono::nanoseconds(cycles * kNanosecondsPerSleepCycle));
    });
  });
  m.def("_npu_streamPriority",
        [](int64_t id, int64_t idx, int64_t type) { return unpack(id, idx, type).priority(); });
  m.def("_npu_setExternalStreamMode", [](const std::string& mode) {
    TORCH_CHECK(mode == "compat" || mode == "full",
                "external stream mode must be 'compat' or 'full', got '", mode, "'",
                NPU_ERROR_SUFFIX);
    external::setMode(mode == "full" ? external::Mode::kFull : external::Mode::kCompat);
  });
  m.def("_npu_getExternalStreamMode",
        [] { return std::string(external::mode() == external::Mode::kFull ? "full" : "compat"); });
  m.def("_npu_taskQueueConfig", [] {
    const auto& c = queue::config();
    return py::make_tuple(static_cast<int>(c.mode), c.launchBlocking, c.perStreamQueue);
  });

  // Note [Host syncs of the op path].
  m.def("_npu_set_sync_debug_mode", [](int64_t mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0,1,2",
                NPU_ERROR_SUFFIX);
    setSyncDebugMode(static_cast<SyncDebugMode>(mode));
  });
  m.def("_npu_get_sync_debug_mode", [] { return static_cast<int>(syncDebugMode()); });
  m.def("_npu_hostSyncStats", [] {
    const HostSyncStats st = hostSyncStats();
    py::dict byOp;
    for (const auto& [op, n] : st.byOp) byOp[py::str(op)] = n;
    return py::make_tuple(st.total, byOp);
  });
  m.def("_npu_resetHostSyncStats", [] { resetHostSyncStats(); });
  m.def("_npu_eraseStream", [](const at::Tensor& t, int64_t id, int64_t idx, int64_t type) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
                "erase_stream expects an npu tensor, but got a tensor on ", t.device(),
                NPU_ERROR_SUFFIX);
    NPUCachingAllocator::eraseStream(t.storage().data_ptr(), unpack(id, idx, type));
  });

  // Random.
  m.def("_npu_defaultGenerators", [] {
    py::tuple gens(device_count_ensure_non_zero());
    for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(gens.size()); ++i) {
      gens[i] = py::reinterpret_steal<py::object>(
          THPGenerator_initDefaultGenerator(getDefaultNPUGenerator(i)));
    }
    return gens;
  });
}

void initStreams(py::module_& m);  // Streams.cpp
void initEvents(py::module_& m);   // Events.cpp
void initNpurt(py::module_& m);    // Npurt.cpp
void initMemory(py::module_& m);   // Memory.cpp
void initGraphs(py::module_& m);   // Graphs.cpp
void initHostCallbacks(py::module_& m);  // HostCallbacks.cpp
void initTrace(py::module_& m);          // Trace.cpp
void initDistributed(py::module_& m);    // Distributed.cpp
void initDistributedRpc(py::module_& m);  // DistributedRpc.cpp
void initLogging(py::module_& m);        // Logging.cpp
void initFlopCount(py::module_& m);      // FlopCount.cpp
void initMstx(py::module_& m);           // Mstx.cpp
}  // namespace c10_npu::python

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_npu native extension (simulated NPU backend)";
  c10_npu::python::initModule(m);
  c10_npu::python::initStreams(m), c10_npu::python::initNpurt(m);
  c10_npu::python::initEvents(m);
  c10_npu::python::initMemory(m);
  c10_npu::python::initGraphs(m);
  c10_npu::python::initHostCallbacks(m);
  c10_npu::python::initTrace(m);
  c10_npu::python::initDistributed(m);
  c10_npu::python::initDistributedRpc(m);
  c10_npu::python::initLogging(m);
  c10_npu::python::initFlopCount(m);
  c10_npu::python::initMstx(m);
}
