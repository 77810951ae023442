// torch_npu._C._flops_count: the FLOP counter (aten/flopcount/,
// Note [Recorded and traversed FLOPs]) under torch_npu's names; the Python
// API is torch_npu.utils.FlopsCounter. Layer: binding. Every function is
// thread-safe.
#include <torch/csrc/utils/pybind.h>

#include "aten/flopcount/FlopCountContext.h"

namespace py = pybind11;

namespace c10_npu::python {

void initFlopCount(py::module_& m) {
  using c10_npu::aten::FlopCountContext;
  auto flops = m.def_submodule("_flops_count", "torch_npu's FLOP counter");
  // A process-wide object that is never destroyed: held by reference.
  py::class_<FlopCountContext, std::unique_ptr<FlopCountContext, py::nodelete>>(
      flops, "_FlopCountContext")
      .def_static("GetInstance", &FlopCountContext::GetInstance,
                  py::return_value_policy::reference)
      .def("enable", &FlopCountContext::enable, "Start counting the FLOPs of ops on npu.")
      .def("disable", &FlopCountContext::disable, "Stop counting; the counts stay.")
      .def("pause", &FlopCountContext::pause,
           "Count later ops in traversedCount only, until resume().")
      .def("resume", &FlopCountContext::resume, "Count later ops in recordedCount again.")
      .def("reset", &FlopCountContext::reset, "Disable, resume and zero both counts.")
      .def_property_readonly("recordedCount", &FlopCountContext::recordedCount)
      .def_property_readonly("traversedCount", &FlopCountContext::traversedCount);
}

}  // namespace c10_npu::python
