// torch_npu._C's graph API: _NPUGraph, pool handles, task groups and
// updates, super-kernel scopes. Layer: binding. The semantics are in
// csrc/core/graphs/NPUGraph.h; this file converts arguments only.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>

#include "core/NPUException.h"
#include "core/graphs/NPUGraph.h"
#include "python/Init.h"
#include "python/StreamArgs.h"

namespace py = pybind11;

namespace c10_npu::python {


namespace {

// torch_npu's capture_error_mode strings.
npuStreamCaptureMode captureMode(const std::string& mode) {
  if (mode == "global") return npuStreamCaptureModeGlobal;
  if (mode == "thread_local") return npuStreamCaptureModeThreadLocal;
  if (mode == "relaxed") return npuStreamCaptureModeRelaxed;
  TORCH_CHECK(false, "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got ",
              mode, NPU_ERROR_SUFFIX);
}

c10::MempoolId_t poolArg(const std::optional<c10::MempoolId_t>& pool) {
  return pool.value_or(c10::MempoolId_t{0, 0});
}

}  // namespace

void initGraphs(py::module_& m) {
  py::class_<NPUGraph>(m, "_NPUGraph")
      .def(py::init<>())
      .def(
          "capture_begin",
          [](NPUGraph& self, std::optional<c10::MempoolId_t> pool, const std::string& mode,
             bool /*report_shape*/) {
            ensureInitialized();
            const npuStreamCaptureMode captureModeValue = captureMode(mode);
            py::gil_scoped_release noGil;
            self.capture_begin(poolArg(pool), captureModeValue);
          },
          py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global",
          py::arg("report_shape") = true)
      // wrap_pybind_function: TORCH_WARN reaches Python's warnings.
      .def("capture_end", torch::wrap_pybind_function_no_gil(&NPUGraph::capture_end))
      .def("replay", torch::wrap_pybind_function_no_gil(&NPUGraph::replay))
      .def("reset", &NPUGraph::reset, py::call_guard<py::gil_scoped_release>())
      .def("pool", torch::wrap_pybind_function(&NPUGraph::pool))
      .def("begin_capture_to_if_node",
           torch::wrap_pybind_function_no_gil(&NPUGraph::begin_capture_to_if_node), py::arg("pred"))
      .def("end_capture_to_conditional_node",
           torch::wrap_pybind_function_no_gil(&NPUGraph::end_capture_to_conditional_node))
      .def("_has_graph_exec", &NPUGraph::has_graph_exec)
      .def("enable_debug_mode", &NPUGraph::enable_debug_mode)
      .def("debug_dump", torch::wrap_pybind_function_no_gil(&NPUGraph::debug_dump),
           py::arg("debug_path"))
      // A reference: pybind11 hands back the Python object that holds the
      // instance (torch_npu.npu.NPUGraph); Python owns it, not the caller.
      .def_static(
          "get_currently_capturing_graph",
          [] {
            ensureInitialized();
            py::gil_scoped_release noGil;
            return NPUGraph::get_currently_capturing_npu_graph();
          },
          py::return_value_policy::reference);

  py::class_<TaskGroupHandle>(m, "_NPUTaskGroupHandle")
      .def_property_readonly("task_group", [](const TaskGroupHandle& h) { return h.group; });

  m.def("_graph_pool_handle", [] {
    ensureInitialized();
    return graphPoolHandle();
  });
  m.def("_npu_isCurrentStreamCapturing", [] { return initialized() && isCurrentStreamCapturing(); });
  m.def("_graph_task_group_begin", [](py::handle s) {
    const NPUStream stream = pyStreamArg(s.ptr(), "graph_task_group_begin");
    py::gil_scoped_release noGil;
    graphTaskGroupBegin(stream);
  });
  m.def("_graph_task_group_end", [](py::handle s) {
    const NPUStream stream = pyStreamArg(s.ptr(), "graph_task_group_end");
    py::gil_scoped_release noGil;
    return graphTaskGroupEnd(stream);
  });
  m.def("_graph_task_update_begin", [](py::handle s, py::handle handle) {
    const NPUStream stream = pyStreamArg(s.ptr(), "graph_task_update_begin");
    TORCH_CHECK_TYPE(py::isinstance<TaskGroupHandle>(handle),
                     "graph_task_update_begin expects the handle returned by "
                     "graph_task_group_end, but got ",
                     Py_TYPE(handle.ptr())->tp_name);
    const TaskGroupHandle h = handle.cast<TaskGroupHandle>();
    py::gil_scoped_release noGil;
    graphTaskUpdateBegin(stream, h);
  });
  m.def("_graph_task_update_end", [](py::handle s) {
    const NPUStream stream = pyStreamArg(s.ptr(), "graph_task_update_end");
    py::gil_scoped_release noGil;
    graphTaskUpdateEnd(stream);
  });
  m.def("_super_kernel_scope_begin", [](std::optional<std::string> name) {
    py::gil_scoped_release noGil;
    superKernelScopeBegin(name.has_value() ? name->c_str() : nullptr);
  });
  m.def("_super_kernel_scope_end", [](std::optional<std::string> name) {
    py::gil_scoped_release noGil;
    superKernelScopeEnd(name.has_value() ? name->c_str() : nullptr);
  });
}

}  // namespace c10_npu::python
