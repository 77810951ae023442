// torch_npu._C: the memory functions behind torch_npu/npu/memory.py.
//
// Layer: binding. Functions that may wait for streams release the GIL. Every
// function is thread-safe (the allocator is).
#include <ATen/core/CachingHostAllocator.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "aten/OpLauncher.h"
#include "core/NPUAllocatorConfig.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUChangeDataPtr.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUPluggableAllocator.h"
#include "core/NPUStream.h"
#include "core/StorageAlias.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

namespace alloc = NPUCachingAllocator;
using PoolId = std::pair<uint64_t, uint64_t>;

c10::MempoolId_t poolId(const PoolId& id) { return {id.first, id.second}; }

py::dict statDict(const c10::CachingAllocator::Stat& stat) {
  py::dict d;
  d["current"] = stat.current;
  d["peak"] = stat.peak;
  d["allocated"] = stat.allocated;
  d["freed"] = stat.freed;
  return d;
}

py::dict statArrayDict(const c10::CachingAllocator::StatArray& stats) {
  // c10's StatType order: aggregate, small pool, large pool.
  static constexpr const char* kNames[] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (size_t i = 0; i < stats.size(); ++i) d[kNames[i]] = statDict(stats[i]);
  return d;
}

// Nested as torch.cuda.memory_stats_as_nested_dict; memory.py flattens it.
py::dict memoryStats(int64_t device) {
  const alloc::DeviceStats s = alloc::getDeviceStats(checkedDeviceIndex(device));
  py::dict d;
  d["allocation"] = statArrayDict(s.allocation);
  d["segment"] = statArrayDict(s.segment);
  d["active"] = statArrayDict(s.active);
  d["inactive_split"] = statArrayDict(s.inactive_split);
  d["allocated_bytes"] = statArrayDict(s.allocated_bytes);
  d["reserved_bytes"] = statArrayDict(s.reserved_bytes);
  d["active_bytes"] = statArrayDict(s.active_bytes);
  d["inactive_split_bytes"] = statArrayDict(s.inactive_split_bytes);
  d["requested_bytes"] = statArrayDict(s.requested_bytes);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["oversize_allocations"] = statDict(s.oversize_allocations);
  d["oversize_segments"] = statDict(s.oversize_segments);
  d["max_split_size"] = s.max_split_size;
  d["num_oom_rejections"] = alloc::getOomRejections(checkedDeviceIndex(device));
  return d;
}

py::dict durationStatDict(const c10::CachingAllocator::DurationStat& stat) {
  py::dict d;
  d["total"] = stat.total;
  d["max"] = stat.max;
  d["min"] = stat.min;
  d["count"] = stat.count;
  d["avg"] = stat.count == 0 ? 0 : stat.total / stat.count;
  return d;
}

// Nested as torch.cuda.host_memory_stats_as_nested_dict (and torch_npu's);
// memory.py flattens it. Note [Pinned allocator statistics].
py::dict hostMemoryStats() {
  const at::HostStats s = at::getHostAllocator(c10::DeviceType::PrivateUse1)->get_stats();
  py::dict d;
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  d["allocations"] = statDict(s.allocations);
  d["active_requests"] = statDict(s.active_requests);
  d["allocated_bytes"] = statDict(s.allocated_bytes);
  d["active_bytes"] = statDict(s.active_bytes);
  d["host_alloc_time"] = durationStatDict(s.host_alloc_time);
  d["host_free_time"] = durationStatDict(s.host_free_time);
  return d;
}

NPUStream streamArg(int64_t id, int64_t idx, int64_t type) {
  TORCH_CHECK(idx >= -1 && idx < 128, "Invalid device_index: ", idx, NPU_ERROR_SUFFIX);
  TORCH_CHECK(type == static_cast<int64_t>(c10::DeviceType::PrivateUse1),
              "Expected an npu stream, but got one of device type ", type, NPU_ERROR_SUFFIX);
  return NPUStream::unpack3(id, static_cast<c10::DeviceIndex>(idx), c10::DeviceType::PrivateUse1);
}

void initPools(py::module_& m) {
  m.def("_npu_mempoolNewId", [] {
    const c10::MempoolId_t id = alloc::newMempoolId();
    return PoolId{id.first, id.second};
  });
  // torch.npu.MemPool's arguments apply when the pool is created.
  m.def(
      "_npu_createOrIncrefPool",
      [](int64_t device, const PoolId& id,
         std::shared_ptr<NPUPluggableAllocator::PluggableAllocator> allocator, bool useOnOom,
         bool noSplit) {
        alloc::createOrIncrefPool(checkedDeviceIndex(device), poolId(id),
                                  alloc::PoolOptions{std::move(allocator), useOnOom, noSplit});
      },
      py::arg("device"), py::arg("id"), py::arg("allocator") = nullptr,
      py::arg("use_on_oom") = false, py::arg("no_split") = false);
  // use_mem_pool: routes the calling thread's allocations (on any stream).
  m.def("_npu_beginAllocateCurrentThreadToPool", [](int64_t device, const PoolId& id) {
    const std::thread::id self = std::this_thread::get_id();
    alloc::beginAllocateToPool(checkedDeviceIndex(device), poolId(id), [self](const NPUStream&) {
      return std::this_thread::get_id() == self;
    });
  });
  m.def("_npu_endAllocateToPool", [](int64_t device, const PoolId& id) {
    alloc::endAllocateToPool(checkedDeviceIndex(device), poolId(id));
  });
  m.def("_npu_releasePool", [](int64_t device, const PoolId& id) {
    alloc::releasePool(checkedDeviceIndex(device), poolId(id));
  });
  m.def("_npu_poolUseCount", [](int64_t device, const PoolId& id) {
    return alloc::getPoolUseCount(checkedDeviceIndex(device), poolId(id));
  });
}

}  // namespace

namespace {

// A Python callable kept by the allocator: released with the GIL held.
struct PyCallable {
  py::object fn;
  ~PyCallable() {
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

void attachOutOfMemoryObserver(py::function observer) {
  auto holder = std::make_shared<PyCallable>();
  holder->fn = std::move(observer);
  alloc::attachOutOfMemoryObserver(
      [holder](int64_t device, int64_t requested, int64_t total, int64_t free) {
        py::gil_scoped_acquire gil;
        try {
          holder->fn(device, requested, total, free);
        } catch (py::error_already_set& e) {
          // Reported like an exception in a __del__: the out-of-memory
          // error that follows is what the allocating code sees.
          e.discard_as_unraisable("an npu out-of-memory observer");
        }
      });
}

}  // namespace

void initMemoryHistory(py::module_& m);       // MemoryHistory.cpp
void initPluggableAllocator(py::module_& m);  // PluggableAllocator.cpp

void initMemory(py::module_& m) {
  // torch_npu.npu_change_data_ptr / get_storage_size (torch_npu/utils/combine_tensors.py).
  // The first may wait for the device: Note [Storages moved into a combined buffer].
  m.def(
      "_npu_changeDataPtr",
      [](const at::Tensor& dst, const at::Tensor& src, int64_t index) {
        changeDataPtr(dst, src, index);
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_npu_storageSize", &storageSize);
  // An alias of t's storage (Note [Storage aliases]), as an UntypedStorage.
  m.def("_npu_storageAlias", [](const at::Tensor& t) {
    return py::reinterpret_steal<py::object>(THPStorage_Wrap(makeStorageAlias(t.storage())));
  });
  m.def("_npu_memoryStats", &memoryStats);
  // torch_npu's name; the observer gets (device, requested bytes, device total, device free).
  m.def("_npu_attach_out_of_memory_observer", &attachOutOfMemoryObserver);
  m.def(
      "_npu_emptyCache",
      [](const PoolId& id) {
        // Finished tasks' captures may still hold blocks: drop them first.
        aten::detail::releaseDeferred();
        alloc::emptyCache(poolId(id));
      },
      py::arg("mempool_id") = PoolId{0, 0}, py::call_guard<py::gil_scoped_release>());
  m.def(
      "_npu_emptyVirtAddrCache",
      [] {
        aten::detail::releaseDeferred();  // as _npu_emptyCache
        alloc::emptyVirtAddrCache();
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_npu_resetPeakMemoryStats",
        [](int64_t d) { alloc::resetPeakStats(checkedDeviceIndex(d)); });
  m.def("_npu_resetAccumulatedMemoryStats",
        [](int64_t d) { alloc::resetAccumulatedStats(checkedDeviceIndex(d)); });
  m.def("_npu_memGetInfo", [](int64_t d) { return alloc::memGetInfo(checkedDeviceIndex(d)); });
  m.def("_npu_setMemoryFraction", [](double fraction, int64_t d) {
    alloc::setMemoryFraction(fraction, checkedDeviceIndex(d));
  });
  m.def("_npu_getMemoryFraction",
        [](int64_t d) { return alloc::getMemoryFraction(checkedDeviceIndex(d)); });
  m.def(
      "_npu_cachingAllocator_raw_alloc",
      [](size_t size, int64_t id, int64_t idx, int64_t type) {
        return reinterpret_cast<uintptr_t>(alloc::rawAlloc(size, streamArg(id, idx, type)));
      },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "_npu_cachingAllocator_raw_delete",
      [](uintptr_t ptr) { alloc::rawDelete(reinterpret_cast<void*>(ptr)); },
      py::call_guard<py::gil_scoped_release>());
  m.def("_npu_npuCachingAllocator_set_allocator_settings",
        [](const std::string& conf) { alloc::setAllocatorSettings(conf); });
  m.def("_npu_checkAllocatorConfig", [] { (void)alloc::allocatorConfig(); });
  m.def("_npu_getAllocatorBackend", [] {
    return std::string(NPUPluggableAllocator::current() != nullptr ? "pluggable" : "native");
  });
  m.def("_npu_hostMemoryStats", &hostMemoryStats);
  m.def("_npu_resetAccumulatedHostMemoryStats",
        [] { at::getHostAllocator(c10::DeviceType::PrivateUse1)->reset_accumulated_stats(); });
  m.def("_npu_resetPeakHostMemoryStats",
        [] { at::getHostAllocator(c10::DeviceType::PrivateUse1)->reset_peak_stats(); });
  m.def("_npu_hostEmptyCache", [] { NPUHostAllocator::emptyCache(); },
        py::call_guard<py::gil_scoped_release>());
  initPluggableAllocator(m);  // before initPools: MemPool takes an allocator
  initPools(m);
  initMemoryHistory(m);
}

}  // namespace c10_npu::python
