// c10d_npu::ParallelStore — torch_npu's ParallelStore (its ParallelTcpStore):
// a TCP key-value store for rendezvous, with torch_npu's constructor.
//
// Layer: distributed (csrc/distributed). Depends on torch's c10d only.
//
// torch_npu's store is its own epoll server speaking to clients over TCP, or,
// in its "tiered" mode, to one proxy per node (the torchrun agent) over a
// local socket. It behaves as a c10d Store like TCPStore: one process holds
// the data (is_server), every other one connects as a client. This one is
// torch's TCPStore (in the wheel) under torch_npu's arguments; what differs:
// Note [ParallelStore arguments].
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace c10d_npu {

// The arguments of torch_npu's ParallelStore constructor, in its order.
struct ParallelStoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 29500;
  int worldSize = -1;     // store users that register (agents); < 0: any number
  bool agentRun = false;  // this process is a torchrun agent, not a worker
  int64_t agentPid = -1;  // tiered mode: the agent whose proxy workers use
  bool isServer = false;
  bool enableTiered = false;
  std::chrono::milliseconds timeout{300000};
  bool waitWorkers = true;
  bool multiTenant = false;
};

class ParallelStore : public c10d::TCPStore {
 public:
  // Starts the server (isServer) and connects; waits for the other agents
  // when waitWorkers (Note [ParallelStore arguments]). Throws c10::Error on
  // bad arguments and c10d's DistNetworkError when it cannot connect within
  // the timeout. The Store operations are TCPStore's: thread-safe.
  explicit ParallelStore(const ParallelStoreOptions& options);

  // The arguments it was built with. Thread-safe (immutable).
  const ParallelStoreOptions& options() const { return options_; }

 private:
  const ParallelStoreOptions options_;
};

}  // namespace c10d_npu
