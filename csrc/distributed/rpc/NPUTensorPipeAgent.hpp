// c10d_npu::rpc::NPUTensorPipeAgent — the agent of the NPU_TENSORPIPE RPC
// backend (torch_npu.distributed.rpc): torch's TensorPipeAgent, with npu
// tensors carried as CPU bytes and put on their mapped devices on arrival.
//
// Layer: distributed (csrc/distributed/rpc). Bound as
// torch_npu._C._distributed_rpc.TensorPipeAgent (csrc/python/DistributedRpc.cpp).
//
// torch's agent does the rest, unchanged: connections, device maps and
// their errors, timeouts, the streams of every send and receive, futures
// that synchronize with the caller's current streams, join and shutdown.
// This class adds only the two edges of Note [NPU tensors cross TensorPipe as
// CPU bytes] (DeviceTrailer.hpp), through the hooks torch's agent has for
// subclasses (pipeWrite, send; FaultyTensorPipeAgent uses the same) and the
// request callback it takes.
#pragma once

#include <torch/csrc/distributed/rpc/request_callback.h>
#include <torch/csrc/distributed/rpc/tensorpipe_agent.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace c10d_npu::rpc {

using torch::distributed::rpc::DeviceMap;
using torch::distributed::rpc::JitFuture;
using torch::distributed::rpc::Message;
using torch::distributed::rpc::RequestCallback;
using torch::distributed::rpc::TensorPipeRpcBackendOptions;
using torch::distributed::rpc::WorkerInfo;

// The request callback of an NPU_TENSORPIPE agent: puts the tensors of a
// request on their devices (applyDeviceTrailer), then hands the request to
// `inner` (torch's RequestCallbackImpl). Thread-safe as `inner` is.
class NPURequestCallback final : public RequestCallback {
 public:
  // Not thread-safe (construction).
  explicit NPURequestCallback(std::unique_ptr<RequestCallback> inner);

 private:
  c10::intrusive_ptr<JitFuture> processMessage(Message& request,
                                               std::vector<c10::Stream> streams) const override;

  std::unique_ptr<RequestCallback> inner_;
};

class NPUTensorPipeAgent final : public torch::distributed::rpc::TensorPipeAgent {
 public:
  // As TensorPipeAgent's constructor; `cb` is wrapped in an
  // NPURequestCallback. Not thread-safe (construction).
  NPUTensorPipeAgent(const c10::intrusive_ptr<::c10d::Store>& store, std::string selfName,
                     torch::distributed::rpc::worker_id_t selfId, std::optional<int> worldSize,
                     TensorPipeRpcBackendOptions opts,
                     std::unordered_map<std::string, DeviceMap> reverseDeviceMaps,
                     std::vector<c10::Device> devices, std::unique_ptr<RequestCallback> cb);

  // TensorPipeAgent::send, whose future completes with the response's
  // tensors on the devices the peer's reverse map chose. Thread-safe.
  c10::intrusive_ptr<JitFuture> send(
      const WorkerInfo& to, c10::intrusive_ptr<Message> message,
      float rpcTimeoutSeconds = torch::distributed::rpc::kUnsetRpcTimeout,
      const DeviceMap& deviceMap = {}) override;

 protected:
  // Writes `message` with every tensor as CPU bytes and the target devices
  // in its trailer, after the streams of its npu tensors ran their work (a
  // failure there is reported through `fn`). Called by torch's agent for
  // requests and responses, from any thread: thread-safe.
  void pipeWrite(const std::shared_ptr<tensorpipe::Pipe>& pipe,
                 const c10::intrusive_ptr<Message>& message, std::vector<c10::Device>&& devices,
                 std::vector<c10::Stream> streams,
                 std::function<void(const tensorpipe::Error&)> fn) noexcept override;
};

}  // namespace c10d_npu::rpc
