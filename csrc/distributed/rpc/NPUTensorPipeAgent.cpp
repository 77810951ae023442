// NPUTensorPipeAgent. See NPUTensorPipeAgent.hpp and Note [NPU tensors
// cross TensorPipe as CPU bytes] in DeviceTrailer.hpp.
#include "distributed/rpc/NPUTensorPipeAgent.hpp"

#include <ATen/core/jit_type.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <tensorpipe/common/error.h>
#include <torch/csrc/distributed/rpc/tensorpipe_utils.h>

#include <algorithm>
#include <exception>
#include <string>

#include <tuple>
#include <utility>

#include "distributed/rpc/DeviceTrailer.hpp"

namespace c10d_npu::rpc {

namespace {

// A failure before the write, reported as TensorPipe reports its own.
class WriteError final : public tensorpipe::BaseError {
 public:
  explicit WriteError(std::string what) : what_(std::move(what)) {}
  std::string what() const override { return what_; }

 private:
  std::string what_;
};

// Blocks until the stream of every npu device among `tensors` ran what was
// queued on it. See Note [An npu tensor is sent after its stream's work].
void waitForProducers(const std::vector<at::Tensor>& tensors,
                      const std::vector<c10::Stream>& streams) {
  std::vector<c10::Device> waited;
  for (const at::Tensor& t : tensors) {
    const c10::Device device = t.device();
    if (device.type() != c10::DeviceType::PrivateUse1 ||
        std::find(waited.begin(), waited.end(), device) != waited.end()) {
      continue;
    }
    torch::distributed::rpc::getStreamForDevice(streams, device).synchronize();
    waited.push_back(device);
  }
}

}  // namespace

NPURequestCallback::NPURequestCallback(std::unique_ptr<RequestCallback> inner)
    : inner_(std::move(inner)) {}

c10::intrusive_ptr<JitFuture> NPURequestCallback::processMessage(
    Message& request, std::vector<c10::Stream> streams) const {
  applyDeviceTrailer(request.tensors(), streams);
  return (*inner_)(request, std::move(streams));
}

NPUTensorPipeAgent::NPUTensorPipeAgent(
    const c10::intrusive_ptr<::c10d::Store>& store, std::string selfName,
    torch::distributed::rpc::worker_id_t selfId, std::optional<int> worldSize,
    TensorPipeRpcBackendOptions opts, std::unordered_map<std::string, DeviceMap> reverseDeviceMaps,
    std::vector<c10::Device> devices, std::unique_ptr<RequestCallback> cb)
    : TensorPipeAgent(store, std::move(selfName), selfId, worldSize, std::move(opts),
                      std::move(reverseDeviceMaps), std::move(devices),
                      std::make_unique<NPURequestCallback>(std::move(cb))) {}

c10::intrusive_ptr<JitFuture> NPUTensorPipeAgent::send(const WorkerInfo& to,
                                                       c10::intrusive_ptr<Message> message,
                                                       float rpcTimeoutSeconds,
                                                       const DeviceMap& deviceMap) {
  c10::intrusive_ptr<JitFuture> response =
      TensorPipeAgent::send(to, std::move(message), rpcTimeoutSeconds, deviceMap);
  // The callback runs on pool streams that wait for the receiving streams
  // (Future::then); the copies go there, and the child future records them
  // for whoever waits on it. An error (timeout, broken pipe) is rethrown by
  // value() and becomes the child's.
  return response->then(
      [](JitFuture& parent) {
        c10::intrusive_ptr<Message> reply = parent.value().toCustomClass<Message>();
        std::vector<c10::Stream> streams;
        for (const c10::Device& device : parent.devices()) {
          streams.push_back(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
        }
        applyDeviceTrailer(reply->tensors(), streams);
        auto storages = reply->getStorages();
        return std::make_tuple(c10::IValue(std::move(reply)), std::move(storages));
      },
      c10::getCustomClassType<c10::intrusive_ptr<Message>>());
}

// Note [An npu tensor is sent after its stream's work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// TensorPipe reads a buffer on its own threads as soon as the write is
// queued, outside any stream's order. The streams torch's agent passes to
// pipeWrite are those the message's tensors were produced for: for a
// request, pool streams it made wait for the sender's current streams; for a
// response, the streams the request ran on. Waiting on the host for the
// stream of each npu tensor's device, before the buffers are handed over,
// makes every write queued before the call (or by the remote function)
// visible, as CUDA's channels do by copying on that stream. A failure of that
// work is the write's error (the caller's future, or the log for a
// response), never a crash. As with CUDA, a tensor must not be modified
// while an RPC carrying it is in flight.
void NPUTensorPipeAgent::pipeWrite(const std::shared_ptr<tensorpipe::Pipe>& pipe,
                                   const c10::intrusive_ptr<Message>& message,
                                   std::vector<c10::Device>&& devices,
                                   std::vector<c10::Stream> streams,
                                   std::function<void(const tensorpipe::Error&)> fn) noexcept {
  c10::intrusive_ptr<Message> wire;
  try {
    waitForProducers(message->tensors(), streams);
    // The trailer goes on a copy of the tensor list, so that the caller's
    // Message keeps its tensors (only the payload is consumed, as
    // TensorPipeAgent::pipeWrite does).
    std::vector<at::Tensor> tensors = message->tensors();
    appendDeviceTrailer(tensors, devices);
    wire = c10::make_intrusive<Message>(std::move(message->payload()), std::move(tensors),
                                        message->type(), message->id());
  } catch (const std::exception& e) {
    fn(tensorpipe::Error(std::make_shared<WriteError>(e.what()), __FILE__, __LINE__));
    return;
  }
  TensorPipeAgent::pipeWrite(pipe, wire, /*devices=*/{}, std::move(streams), std::move(fn));
}

}  // namespace c10d_npu::rpc
