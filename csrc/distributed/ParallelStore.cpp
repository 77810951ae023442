// ParallelStore: torch_npu's constructor over torch's TCPStore.
//
// Note [ParallelStore arguments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's ParallelStore(host, port, world_size, agent_run, agent_pid,
// is_server, enable_tiered, timeout, wait_workers, multi_tenant):
//  - world_size counts the stores that register with the server: the
//    *agents* (agent_run=True, torchrun's one per node), not the workers. With
//    wait_workers, an agent registers and the server's constructor waits
//    until world_size agents did; a worker (agent_run=False) neither
//    registers nor waits. TCPStore counts the clients built with waitWorkers,
//    so an agent is built with wait_workers and a worker without.
//  - enable_tiered and agent_pid: in torch_npu's tiered mode workers reach
//    the server through their agent's proxy (a local socket named after
//    agent_pid) rather than each over TCP. That is a connection topology,
//    not a behaviour of the store: here every store connects to host:port
//    directly, and both are accepted and recorded without effect.
//  - timeout bounds the connection and every get/wait, as for TCPStore;
//    multi_tenant lets several stores of one process share one server port.
#include "distributed/ParallelStore.hpp"

#include <c10/util/Exception.h>

#include <limits>

namespace c10d_npu {

namespace {

c10d::TCPStoreOptions tcpOptions(const ParallelStoreOptions& o) {
  TORCH_CHECK(!o.host.empty(), "ParallelStore: expected a host name or address, but got an "
              "empty string");
  TORCH_CHECK(o.timeout.count() > 0, "ParallelStore: expected a positive timeout, but got ",
              o.timeout.count(), " ms");
  TORCH_CHECK(o.agentPid >= -1 && o.agentPid <= std::numeric_limits<uint32_t>::max(),
              "ParallelStore: expected agent_pid to be a process id or -1, but got ", o.agentPid);
  c10d::TCPStoreOptions t;
  t.port = o.port;
  t.isServer = o.isServer;
  if (o.worldSize > -1) t.numWorkers = static_cast<std::size_t>(o.worldSize);
  t.waitWorkers = o.waitWorkers && o.agentRun;  // Note [ParallelStore arguments]
  t.timeout = o.timeout;
  t.multiTenant = o.multiTenant;
  return t;
}

}  // namespace

ParallelStore::ParallelStore(const ParallelStoreOptions& options)
    : c10d::TCPStore(options.host, tcpOptions(options)), options_(options) {}

}  // namespace c10d_npu
