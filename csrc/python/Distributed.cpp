// torch_npu._C._distributed: the "hccl" backend's class for Python.
//
// Layer: binding. ProcessGroupHCCL is bound as a subclass of torch's
// torch._C._distributed_c10d.Backend (pybind11 shares class registrations
// between torch._C and this module), so torch.distributed accepts it from
// the creator that torch_npu.distributed registers, and every collective
// reaches it through torch's own Backend bindings. The transport, a
// torch.distributed.ProcessGroupGloo built in Python, arrives here as a
// c10d::Backend: the wheel has no gloo headers.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupHCCL.hpp"

namespace py = pybind11;

namespace c10_npu::python {

void initDistributed(py::module_& m) {
  // Registers torch's Backend class first (importing torch.distributed does).
  py::module_::import("torch._C._distributed_c10d");
  auto sub = m.def_submodule("_distributed", "torch.distributed's hccl backend for npu");
  py::class_<c10d_npu::ProcessGroupHCCL, c10d::Backend,
             c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL>>(sub, "ProcessGroupHCCL", R"(
ProcessGroupHCCL(transport, rank, size)

The "hccl" backend of npu tensors: collectives ordered on NPU streams, carried
by ``transport`` (a ProcessGroupGloo of the same rank and size). Made by
torch_npu.distributed's registered creator; user code calls
``torch.distributed.init_process_group("hccl")``.)")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int>(), py::arg("transport"),
           py::arg("rank"), py::arg("size"))
      .def_property_readonly("transport", &c10d_npu::ProcessGroupHCCL::transport,
                             "The gloo backend that carries the data.")
      .def(
          "comm_stream",
          [](const c10d_npu::ProcessGroupHCCL& self) -> py::object {
            auto stream = self.commStream();
            if (!stream) return py::none();
            return py::make_tuple(stream->id(), stream->device_index(),
                                  static_cast<int>(stream->device_type()));
          },
          "(stream_id, device_index, device_type) of the group's communication stream, or "
          "None before the first collective.");
}

}  // namespace c10_npu::python
