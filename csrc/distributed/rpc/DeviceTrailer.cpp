// The device trailer of an NPU_TENSORPIPE message.
// See Note [NPU tensors cross TensorPipe as CPU bytes] in DeviceTrailer.hpp.
#include "distributed/rpc/DeviceTrailer.hpp"

#include <ATen/ops/empty.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/irange.h>

#include <cstdint>

namespace c10d_npu::rpc {

namespace {

// "NPUTPDEV" in ASCII: marks the trailer, so that a message from a peer that
// is not an NPU_TENSORPIPE agent is refused instead of misread.
constexpr int64_t kTrailerMagic = 0x4e50555450444556;
constexpr int64_t kCpuTarget = -1;

bool isTrailer(const at::Tensor& t, size_t numTensors) {
  return t.device().is_cpu() && t.scalar_type() == at::kLong && t.dim() == 1 &&
         t.is_contiguous() && t.numel() == static_cast<int64_t>(numTensors) + 1 &&
         t.data_ptr<int64_t>()[0] == kTrailerMagic;
}

}  // namespace

void appendDeviceTrailer(std::vector<at::Tensor>& tensors,
                         const std::vector<c10::Device>& targets) {
  TORCH_INTERNAL_ASSERT(targets.empty() || targets.size() == tensors.size(),
                        "NPU_TENSORPIPE: ", targets.size(), " target devices for ", tensors.size(),
                        " tensors");
  at::Tensor trailer = at::empty({static_cast<int64_t>(tensors.size()) + 1}, at::kLong);
  int64_t* out = trailer.data_ptr<int64_t>();
  out[0] = kTrailerMagic;
  for (const auto i : c10::irange(tensors.size())) {
    out[i + 1] = targets.empty() || targets[i].is_cpu() ? kCpuTarget : targets[i].index();
  }
  tensors.push_back(std::move(trailer));
}

void applyDeviceTrailer(std::vector<at::Tensor>& tensors, const std::vector<c10::Stream>& streams) {
  TORCH_CHECK(!tensors.empty() && isTrailer(tensors.back(), tensors.size() - 1),
              "NPU_TENSORPIPE received an RPC message without its device trailer: every worker of "
              "the group must call init_rpc with backend=BackendType.NPU_TENSORPIPE");
  const at::Tensor trailer = std::move(tensors.back());
  tensors.pop_back();
  const int64_t* targets = trailer.data_ptr<int64_t>() + 1;
  // The copies are queued on the receiving streams: the agent (or the
  // future) makes the consumer's current streams wait for them.
  c10::MultiStreamGuard guard(streams);
  for (const auto i : c10::irange(tensors.size())) {
    if (targets[i] == kCpuTarget) continue;
    TORCH_CHECK(targets[i] >= 0 && targets[i] < 256,
                "NPU_TENSORPIPE received a tensor for npu device ", targets[i],
                ", which is not a device index");
    const c10::Device device(c10::DeviceType::PrivateUse1,
                             static_cast<c10::DeviceIndex>(targets[i]));
    tensors[i] = tensors[i].to(device);
  }
}

}  // namespace c10d_npu::rpc
