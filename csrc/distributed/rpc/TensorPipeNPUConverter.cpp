// The TensorPipe device type converter of npu tensors: how torch's
// TensorPipe serializer hands the bytes of an npu tensor to TensorPipe.
//
// Layer: distributed (csrc/distributed/rpc). Registered at load, as torch
// registers CUDA's, through torch's converter registry (the extension point
// torch_npu's tensorpipe_npu.cpp uses too).
//
// The bytes go out as a TensorPipe CPU buffer over the device memory itself:
// device memory is host memory in the simulator, and the wheel's TensorPipe
// has CPU channels only (Note [NPU tensors cross TensorPipe as CPU bytes] in
// DeviceTrailer.hpp).
//
// The converter only describes the memory: NPUTensorPipeAgent::pipeWrite has
// waited for the tensor's stream before torch's serializer calls it (Note [An
// npu tensor is sent after its stream's work] in NPUTensorPipeAgent.cpp), and
// the serializer keeps the tensor, hence its memory, alive until TensorPipe
// finished the write.
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>
#include <tensorpipe/common/cpu_buffer.h>
#include <tensorpipe/core/message.h>
#include <torch/csrc/distributed/rpc/tensorpipe_utils.h>

#include <optional>
#include <vector>

namespace c10d_npu::rpc {

namespace {

using torch::distributed::rpc::TensorpipeDeviceTypeConverter;

class TensorPipeNPUConverter final : public TensorpipeDeviceTypeConverter {
 public:
  // Thread-safe: the converter has no state.
  std::optional<std::vector<char>> prepareTensorForSending(
      const c10::Storage& storage, const std::vector<c10::Stream>& /*streams*/,
      tensorpipe::Message& message) const override {
    tensorpipe::CpuBuffer buffer;
    buffer.ptr = storage.nbytes() == 0 ? nullptr : storage.mutable_data();
    tensorpipe::Message::Tensor tensor;
    tensor.buffer = buffer;
    tensor.length = storage.nbytes();
    message.tensors.push_back(std::move(tensor));
    return std::nullopt;
  }

  // torch's reader only asks the converters of "cpu" and "cuda" wire
  // devices, and an NPU_TENSORPIPE writer sends npu tensors as "cpu" (Note
  // [NPU tensors cross TensorPipe as CPU bytes]): this is never called.
  at::DataPtr allocateTensorForReceiving(c10::DeviceIndex deviceIndex, size_t /*length*/,
                                         const std::vector<c10::Stream>& /*streams*/,
                                         tensorpipe::Allocation& /*allocation*/) const override {
    TORCH_INTERNAL_ASSERT(false, "NPU_TENSORPIPE: TensorPipe asked for npu memory on device ",
                          static_cast<int>(deviceIndex),
                          ", but npu tensors are received as CPU bytes");
  }
};

const TensorPipeNPUConverter kConverter;
const torch::distributed::rpc::TensorpipeDeviceTypeConverterRegistrar kRegistrar(
    c10::DeviceType::PrivateUse1, &kConverter);

}  // namespace

}  // namespace c10d_npu::rpc
