// torch_npu._C: user allocators (Note [Pluggable allocators] in
// core/NPUPluggableAllocator.h) behind torch_npu/npu/_pluggable_allocator.py,
// with torch_npu's names: _npu_NPUAllocator, _npu_customAllocator,
// _npu_changeCurrentAllocator, _npu_getAllocator.
//
// Layer: binding. Function addresses arrive as Python ints (ctypes); a zero
// address is refused with ValueError. Every function is thread-safe.
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <memory>

#include "core/NPUException.h"
#include "core/NPUPluggableAllocator.h"
#include "npurt/npurt.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

namespace pluggable = NPUPluggableAllocator;
using Allocator = pluggable::PluggableAllocator;

// A C function pointer from a ctypes address; raises ValueError for 0.
template <typename Fn>
Fn functionAt(uint64_t address, const char* what) {
  TORCH_CHECK_VALUE(address != 0, "NPUPluggableAllocator: the address of the ", what,
                    " function is 0 (NULL)", NPU_ERROR_SUFFIX);
  return reinterpret_cast<Fn>(static_cast<uintptr_t>(address));
}

}  // namespace

void initPluggableAllocator(py::module_& m) {
  auto cls = py::class_<Allocator, std::shared_ptr<Allocator>>(m, "_npu_NPUAllocator");
  cls.def("set_get_device_stats_fn",
          [](Allocator& self, uint64_t fn) {
            self.setDeviceStatsFn(functionAt<pluggable::DeviceStatsFn>(fn, "get_device_stats"));
          })
      .def("set_reset_peak_status_fn",
           [](Allocator& self, uint64_t fn) {
             self.setResetPeakStatsFn(
                 functionAt<pluggable::ResetPeakStatsFn>(fn, "reset_peak_status"));
           })
      .def("set_init_fn",
           [](Allocator& self, uint64_t fn) {
             self.setInitFn(functionAt<pluggable::InitFn>(fn, "init"));
           })
      .def("set_reset_fn",
           [](Allocator& self, uint64_t fn) {
             self.setResetFn(functionAt<pluggable::ResetFn>(fn, "reset"));
           })
      .def("set_memory_fraction_fn",
           [](Allocator& self, uint64_t fn) {
             self.setMemoryFractionFn(
                 functionAt<pluggable::MemoryFractionFn>(fn, "memory_fraction"));
           })
      // The C++ hooks (Note [Pluggable allocator hooks]): torch_npu's names,
      // including its irregular ones (no _fn on two of the pool hooks).
      .def("set_base_alloc_fn",
           [](Allocator& self, uint64_t fn) {
             self.setBaseAllocFn(functionAt<pluggable::BaseAllocFn>(fn, "base_alloc"));
           })
      .def("set_record_stream_fn",
           [](Allocator& self, uint64_t fn) {
             self.setRecordStreamFn(functionAt<pluggable::StreamUseFn>(fn, "record_stream"));
           })
      .def("set_erase_stream_fn",
           [](Allocator& self, uint64_t fn) {
             self.setEraseStreamFn(functionAt<pluggable::StreamUseFn>(fn, "erase_stream"));
           })
      .def("set_begin_allocate_to_pool",
           [](Allocator& self, uint64_t fn) {
             self.setBeginAllocateToPoolFn(
                 functionAt<pluggable::BeginAllocateToPoolFn>(fn, "begin_allocate_to_pool"));
           })
      .def("set_end_allocate_to_pool_fn",
           [](Allocator& self, uint64_t fn) {
             self.setEndAllocateToPoolFn(functionAt<pluggable::PoolFn>(fn, "end_allocate_to_pool"));
           })
      .def("set_release_pool", [](Allocator& self, uint64_t fn) {
        self.setReleasePoolFn(functionAt<pluggable::PoolFn>(fn, "release_pool"));
      });
  // torch_npu names the class with the setters _NPUPluggableAllocator.
  m.attr("_NPUPluggableAllocator") = cls;

  m.def("_npu_customAllocator", [](uint64_t allocFn, uint64_t freeFn) {
    return std::make_shared<Allocator>(functionAt<pluggable::AllocFn>(allocFn, "alloc"),
                                       functionAt<pluggable::FreeFn>(freeFn, "free"));
  });
  m.def("_npu_changeCurrentAllocator", [](const std::shared_ptr<Allocator>& allocator) {
    int count = 0;
    NPU_CHECK(npuGetDeviceCount(&count));
    pluggable::changeCurrentAllocator(allocator, count);
  });
  // None while the caching allocator is in use.
  m.def("_npu_getAllocator", [] { return pluggable::currentShared(); });
}

}  // namespace c10_npu::python
