// torch_npu._C._logging: the C++ log settings (core/logging/LogContext.h),
// which torch_npu/_logging/_internal.py feeds from torch._logging. Layer:
// binding. Every function is thread-safe.
#include <torch/csrc/utils/pybind.h>

#include "core/logging/LogContext.h"

namespace py = pybind11;

namespace c10_npu::python {

void initLogging(py::module_& m) {
  auto logging = m.def_submodule("_logging", "torch_npu's C++ log settings");
  // The context lives until exit (it is never destroyed): Python holds it by
  // reference without owning it.
  py::class_<npu_logging::LogContext, std::unique_ptr<npu_logging::LogContext, py::nodelete>>(
      logging, "_LogContext")
      .def_static("GetInstance", &npu_logging::LogContext::GetInstance,
                  py::return_value_policy::reference)
      .def("setLogs", &npu_logging::LogContext::setLogs, py::arg("qname_levels"),
           "Sets the levels of the C++ loggers from {qualified logger name: logging level}, "
           "e.g. torch._logging._internal.log_state.log_qname_to_level.");
}

}  // namespace c10_npu::python
