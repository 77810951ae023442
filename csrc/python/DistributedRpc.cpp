// torch_npu._C._distributed_rpc: the agent of the NPU_TENSORPIPE RPC backend,
// as torch_npu binds it there (TensorPipeAgent, built by
// torch_npu.distributed.rpc.backend_registry).
//
// Layer: binding. The class is bound as a subclass of torch's
// torch._C._distributed_rpc.TensorPipeAgent (pybind11 shares class
// registrations between torch._C and this module), so torch's RPC API takes
// it as the current agent and every method (join, shutdown, worker infos,
// device maps, metrics) is torch's binding. Its request callback is torch's
// RequestCallbackImpl (Python functions, TorchScript, RRefs, distributed
// autograd), which lives in libtorch_python: hence the agent is built here.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/rpc/request_callback_impl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/rpc/NPUTensorPipeAgent.hpp"

namespace py = pybind11;

namespace c10_npu::python {

void initDistributedRpc(py::module_& m) {
  using c10d_npu::rpc::DeviceMap;
  using c10d_npu::rpc::NPUTensorPipeAgent;
  using torch::distributed::rpc::TensorPipeRpcBackendOptions;
  using torch::distributed::rpc::worker_id_t;
  // torch's bindings first: the base classes must be registered.
  py::module_::import("torch._C._distributed_rpc");
  auto sub = m.def_submodule("_distributed_rpc", "torch_npu's distributed RPC bindings");
  py::class_<NPUTensorPipeAgent, torch::distributed::rpc::TensorPipeAgent,
             std::shared_ptr<NPUTensorPipeAgent>>(
      sub, "TensorPipeAgent",
      "torch's TensorPipeAgent for npu tensors: they travel as CPU bytes, after their stream's "
      "work, and land on the device the device map names (docs/DISTRIBUTED.md, RPC).")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, std::string name,
                       worker_id_t rank, std::optional<int> worldSize,
                       TensorPipeRpcBackendOptions opts,
                       std::unordered_map<std::string, DeviceMap> reverseDeviceMaps,
                       std::vector<c10::Device> devices) {
             auto agent = std::make_unique<NPUTensorPipeAgent>(
                 store, std::move(name), rank, worldSize, std::move(opts),
                 std::move(reverseDeviceMaps), std::move(devices),
                 std::make_unique<torch::distributed::rpc::RequestCallbackImpl>());
             // Destroyed without the GIL, as torch's agent: its destructor
             // joins threads that may need the GIL.
             return std::shared_ptr<NPUTensorPipeAgent>(
                 agent.release(), torch::impl::destroy_without_gil<NPUTensorPipeAgent>);
           }),
           py::arg("store"), py::arg("name"), py::arg("rank"), py::arg("world_size"),
           py::arg("rpc_backend_options"), py::arg("reverse_device_maps"), py::arg("devices"));
  py::module_::import("sys").attr("modules")["torch_npu._C._distributed_rpc"] = sub;
}

}  // namespace c10_npu::python
