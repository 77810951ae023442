// See HostMathTask.h and Note [Kernels composed of CPU ops].
#include "aten/HostMathTask.h"

#include <c10/util/Exception.h>

namespace c10_npu::aten {

c10::DeviceIndex commonNpuDevice(const char* op, c10::ArrayRef<at::Tensor> tensors) {
  c10::DeviceIndex device = -1;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    // Worded like the generic path's check (AsyncFallback.cpp), which is
    // worded like PyTorch's.
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                t.device(), " and npu! (when checking arguments of ", op, ")", NPU_ERROR_SUFFIX);
    const c10::DeviceIndex d = t.device().index();
    TORCH_CHECK(device == -1 || device == d,
                "Expected all tensors to be on the same device, but found at least two devices, "
                "npu:",
                static_cast<int>(device), " and npu:", static_cast<int>(d),
                "! (when checking arguments of ", op, ")", NPU_ERROR_SUFFIX);
    device = d;
  }
  TORCH_CHECK(device >= 0, op, " got no npu tensor", NPU_ERROR_SUFFIX);
  return device;
}

void checkSameDtype(const char* op, std::initializer_list<const char*> names,
                    c10::ArrayRef<at::Tensor> tensors) {
  TORCH_INTERNAL_ASSERT(names.size() == tensors.size() && !tensors.empty());
  const auto* name = names.begin();
  const at::Tensor& first = tensors[0];
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!t.defined() || t.scalar_type() == first.scalar_type(), op, ": expected ", *name,
                " to have the dtype of ", *names.begin(), " (", first.scalar_type(), "), but got ",
                t.scalar_type(), NPU_ERROR_SUFFIX);
    ++name;
  }
}

at::Tensor widened(const at::Tensor& t) {
  if (!t.defined()) return t;
  const c10::ScalarType s = t.scalar_type();
  return s == at::kHalf || s == at::kBFloat16 ? t.to(at::kFloat) : t;
}

namespace detail {

void copyHostResults(const char* op, const HostTensors& outputs, const HostTensors& results) {
  // A mismatch is a bug of the kernel's shape function; it fails the op (and
  // poisons its outputs) instead of broadcasting a result of another shape.
  TORCH_CHECK(results.size() == outputs.size(), op, ": the host computation returned ",
              results.size(), " results for ", outputs.size(), " outputs", NPU_ERROR_SUFFIX);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    TORCH_CHECK(results[i].defined() && results[i].sizes() == outputs[i].sizes(), op,
                ": the host computation returned a result of shape ",
                results[i].defined() ? results[i].sizes() : c10::IntArrayRef{}, " for output ", i,
                " of shape ", outputs[i].sizes(), NPU_ERROR_SUFFIX);
    outputs[i].copy_(results[i]);
  }
}

}  // namespace detail
}  // namespace c10_npu::aten
