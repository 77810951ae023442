// torch_npu._C._distributed_c10d: the distributed classes torch_npu binds
// there — ProcessGroupHCCL (the "hccl" backend) with its Options, and
// ParallelStore.
//
// Layer: binding. The classes are bound as subclasses of torch's
// torch._C._distributed_c10d classes (pybind11 shares class registrations
// between torch._C and this module): ProcessGroupHCCL of Backend (so
// torch.distributed takes it from the creator torch_npu.distributed
// registers, and every collective reaches it through torch's own Backend
// bindings), Options of Backend.Options, ParallelStore of Store (so
// init_process_group(store=...) and PrefixStore take it). The transport, a
// ProcessGroupGloo, is built here through its Python class: the wheel has no
// gloo headers.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "distributed/ParallelStore.hpp"
#include "distributed/ProcessGroupHCCL.hpp"

namespace py = pybind11;

namespace c10_npu::python {

namespace {

using c10d_npu::ParallelStore;
using c10d_npu::ProcessGroupHCCL;
using Options = ProcessGroupHCCL::Options;

// torch_npu's default timeout of a ProcessGroupHCCL built without options.
constexpr std::chrono::milliseconds kDefaultTimeout{30 * 60 * 1000};

// A ProcessGroupGloo over `store`: the transport. Caller holds the GIL (the
// Python constructor releases it while gloo connects to the peers).
c10::intrusive_ptr<c10d::Backend> buildTransport(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size,
                                                 std::chrono::milliseconds timeout) {
  TORCH_CHECK(store, "ProcessGroupHCCL: expected a store, but got None");
  py::object gloo = py::module_::import("torch._C._distributed_c10d").attr("ProcessGroupGloo");
  return gloo(py::cast(store), rank, size, timeout).cast<c10::intrusive_ptr<c10d::Backend>>();
}

c10::intrusive_ptr<ProcessGroupHCCL> makeGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int size,
                                               c10::intrusive_ptr<Options> options) {
  if (!options) options = c10::make_intrusive<Options>();
  auto transport = buildTransport(store, rank, size, options->timeout);
  py::gil_scoped_release release;
  return c10::make_intrusive<ProcessGroupHCCL>(store, rank, size, std::move(options),
                                               std::move(transport));
}

// reinit_process_group: a new transport over a store prefix of its own (the
// old one's keys stay behind it). Every rank of the group calls this, in the
// same order, as gloo connects the new transport to the peers.
void rebuildTransport(ProcessGroupHCCL& self) {
  const int generation = self.transportGeneration() + 1;
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "transport" + std::to_string(generation) + "/", self.store());
  auto transport = buildTransport(store, self.getRank(), self.getSize(),
                                  self.getOptions()->timeout);
  py::gil_scoped_release release;
  self.setTransport(std::move(transport));
}

void bindProcessGroupHCCL(py::module_& m) {
  py::class_<ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupHCCL>> cls(
      m, "ProcessGroupHCCL", R"(
ProcessGroupHCCL(store, rank, size, options=None)
ProcessGroupHCCL(store, rank, size, timeout=timedelta(minutes=30))

The "hccl" backend of npu tensors: collectives ordered on NPU streams,
carried by a ProcessGroupGloo of the same store, rank, size and timeout.
torch.distributed builds it through the creator torch_npu.distributed
registers; user code calls ``torch.distributed.init_process_group("hccl")``.)");
  cls.def(py::init(&makeGroup), py::arg("store"), py::arg("rank"), py::arg("size"),
          py::arg("options"))
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             auto options = c10::make_intrusive<Options>();
             options->timeout = timeout;
             return makeGroup(store, rank, size, std::move(options));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout") = kDefaultTimeout)
      .def_property_readonly("options", &ProcessGroupHCCL::getOptions,
                             "The group's ProcessGroupHCCL.Options.")
      .def_property_readonly(
          "transport",
          [](const ProcessGroupHCCL& self) {
            py::gil_scoped_release release;
            return self.transport();
          },
          "The gloo backend that carries the data.")
      .def("_rebuild_transport", &rebuildTransport,
           "Replaces the transport with a new one; every rank of the group calls it.")
      .def(
          "comm_stream",
          [](const ProcessGroupHCCL& self) -> py::object {
            std::optional<c10_npu::NPUStream> stream;
            {
              py::gil_scoped_release release;
              stream = self.commStream();
            }
            if (!stream) return py::none();
            return py::make_tuple(stream->id(), stream->device_index(),
                                  static_cast<int>(stream->device_type()));
          },
          "(stream_id, device_index, device_type) of the group's communication stream, or "
          "None before the first collective.")
      .def("batch_isend_irecv", &ProcessGroupHCCL::batchIsendIrecv, py::arg("op_type"),
           py::arg("tensors"), py::arg("remote_rank_list"),
           py::call_guard<py::gil_scoped_release>(),
           "torch_npu's batched point to point: op_type[i] ('isend' or 'irecv') of "
           "tensors[i] with group rank remote_rank_list[i]; one Work for all.")
      .def("_set_default_timeout", &ProcessGroupHCCL::setTimeout, py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("_add_ephemeral_timeout", &ProcessGroupHCCL::addEphemeralTimeout, py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());

  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(
      cls, "Options", R"(
Options of an hccl group, with torch_npu's fields: ``is_high_priority_stream``
(the communication streams' priority), ``_timeout`` (the transport's), and
``hccl_config``, ``op_timeout``, ``global_ranks_in_group``, ``group_id``,
recorded without effect (docs/DISTRIBUTED.md).)")
      .def(py::init<bool>(), py::arg("is_high_priority_stream") = false)
      .def_readwrite("op_timeout", &Options::opTimeout)
      .def_readwrite("is_high_priority_stream", &Options::is_high_priority_stream)
      .def_readwrite("global_ranks_in_group", &Options::global_ranks_in_group)
      .def_readwrite("hccl_config", &Options::hccl_config)
      .def_readwrite("group_id", &Options::group_id);
}

void bindParallelStore(py::module_& m) {
  py::class_<ParallelStore, c10d::Store, c10::intrusive_ptr<ParallelStore>>(
      m, "ParallelStore", R"(
ParallelStore(host="127.0.0.1", port=29500, world_size=-1, agent_run=False, agent_pid=-1,
              is_server=False, enable_tiered=False, timeout=timedelta(seconds=300),
              wait_workers=True, multi_tenant=False)

torch_npu's TCP key-value store: the server store (``is_server``) holds the
data, the others connect to it over TCP. ``world_size`` counts the agents
(``agent_run=True``) that register; with ``wait_workers`` the server waits
for them. ``enable_tiered`` and ``agent_pid`` (torch_npu's per-node proxy)
are accepted without effect: every store connects to the server directly.)")
      .def(py::init([](const std::string& host, uint16_t port, int worldSize, bool agentRun,
                       int64_t agentPid, bool isServer, bool enableTiered,
                       std::chrono::milliseconds timeout, bool waitWorkers, bool multiTenant) {
             c10d_npu::ParallelStoreOptions o;
             o.host = host;
             o.port = port;
             o.worldSize = worldSize;
             o.agentRun = agentRun;
             o.agentPid = agentPid;
             o.isServer = isServer;
             o.enableTiered = enableTiered;
             o.timeout = timeout;
             o.waitWorkers = waitWorkers;
             o.multiTenant = multiTenant;
             return c10::make_intrusive<ParallelStore>(o);
           }),
           py::arg("host") = "127.0.0.1", py::arg("port") = 29500, py::arg("world_size") = -1,
           py::arg("agent_run") = false, py::arg("agent_pid") = -1,
           py::arg("is_server") = false, py::arg("enable_tiered") = false,
           py::arg("timeout") = std::chrono::milliseconds(300000),
           py::arg("wait_workers") = true, py::arg("multi_tenant") = false,
           py::call_guard<py::gil_scoped_release>())  // connecting may wait for the server
      .def_property_readonly("host", [](const ParallelStore& s) { return s.options().host; })
      .def_property_readonly("port", [](const ParallelStore& s) { return s.options().port; });
}

}  // namespace

void initDistributed(py::module_& m) {
  // Registers torch's Backend and Store classes first.
  py::module_::import("torch._C._distributed_c10d");
  auto sub = m.def_submodule("_distributed_c10d", "torch_npu's distributed c10d bindings");
  bindProcessGroupHCCL(sub);
  bindParallelStore(sub);
  // `from torch_npu._C._distributed_c10d import ...` needs the module in
  // sys.modules (torch registers its torch._C children the same way).
  py::module_::import("sys").attr("modules")["torch_npu._C._distributed_c10d"] = sub;
}

}  // namespace c10_npu::python
