// torch_npu._C's side of the trace hooks (Note [Trace hooks] in
// core/NPUTrace.h): turning them on and off, and the two hooks PyTorch's
// GPUTrace has no slot for (record_stream, erase_stream), which call
// torch.npu._gpu_trace's registries the way PyTorch's interpreter calls the
// others. Layer: binding. Every function is thread-safe.
#include <c10/core/impl/GPUTrace.h>
#include <c10/util/Logging.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>

#include "core/NPUException.h"
#include "core/NPUTrace.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

// torch_npu's sanitizer modes (torch_npu/npu/_sanitizer.py SanitizerMode).
constexpr int kStreamMode = 0;
constexpr int kKernelMode = 1;

// Calls torch.npu._gpu_trace.<registry>.fire_callbacks(data_ptr, stream), as
// PyTorch's interpreter does for the hooks it knows: with the GIL, logging
// (not raising) a failure, and nothing once the interpreter is gone.
void fireRegistry(const char* registry, uintptr_t data_ptr, uintptr_t stream) noexcept {
  if (!Py_IsInitialized()) return;
  try {
    py::gil_scoped_acquire gil;
    try {
      py::module_ mod = py::module_::import("torch.npu");
      mod.attr("_gpu_trace").attr(registry).attr("fire_callbacks")(data_ptr, stream);
    } catch (const std::exception& e) {
      LOG(ERROR) << "npu trace hook " << registry << " failed: " << e.what();
    }
  } catch (...) {
    // No GIL to be had (interpreter shutting down): nothing to report to.
  }
}

void recordStreamHook(uintptr_t data_ptr, uintptr_t stream) noexcept {
  fireRegistry("RecordStreamCallbacks", data_ptr, stream);
}

void eraseStreamHook(uintptr_t data_ptr, uintptr_t stream) noexcept {
  fireRegistry("EraseStreamCallbacks", data_ptr, stream);
}

// torch_npu._C._activate_npu_trace(mode): torch_npu's entry point.
void activateNpuTrace(int mode) {
  TORCH_CHECK(mode != kKernelMode,
              "_activate_npu_trace: the kernel check mode (mode 1, chosen by torch_npu when "
              "ASCEND_OPP_DEBUG_PATH is set) needs Ascend's debug kernels and is not available on "
              "the simulated NPU; use the stream check mode (0).",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK_VALUE(mode == kStreamMode, "_activate_npu_trace: expected mode 0 (stream check), ",
                    "but got ", mode, NPU_ERROR_SUFFIX);
  py::module_::import("torch._C").attr("_activate_gpu_trace")();
  TORCH_CHECK(c10::impl::GPUTrace::get_trace() != nullptr,
              "_activate_npu_trace: PyTorch's GPU trace belongs to another interpreter of this "
              "process; the npu trace can only report to that one.",
              NPU_ERROR_SUFFIX);
  trace::setStreamUseHooks(&recordStreamHook, &eraseStreamHook);
  trace::setActive(true);
}

}  // namespace

void initTrace(py::module_& m) {
  m.def("_activate_npu_trace", &activateNpuTrace, py::arg("mode") = kStreamMode);
  // Off again (the sanitizer's disable(), and process exit): PyTorch's GPU
  // trace cannot be turned off, the npu hooks can.
  m.def("_npu_deactivateTrace", [] { trace::setActive(false); });
  m.def("_npu_isTraceActive", [] { return trace::tracer() != nullptr; });
}

}  // namespace c10_npu::python
