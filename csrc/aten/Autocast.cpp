// Automatic mixed precision on npu: the AutocastPrivateUse1 kernels.
//
// Note [Autocast on npu]
// ~~~~~~~~~~~~~~~~~~~~~~
// torch.autocast("npu") turns on the AutocastPrivateUse1 dispatch key. An op
// with no kernel for that key falls through (it runs in the dtypes it was
// given); the ops below cast their inputs first, with the policies and op
// lists PyTorch's CUDA autocast uses (ATen/autocast_mode.h), so a model
// behaves under autocast on npu as it does on CUDA: matmuls and convolutions
// in the autocast dtype (float16 by default), numerically sensitive ops
// (losses, norms, softmax, exp, log, ...) in float32, and ops with several
// inputs in their widest dtype. The simulated device computes every dtype
// the CPU does, so float16 and bfloat16 are both supported. As on CUDA (and
// torch_npu), binary_cross_entropy is refused under autocast: its float16
// inputs usually come from a sigmoid whose rounding it cannot survive.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace c10_npu::aten {
namespace {

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// Raises PyTorch's (and torch_npu's) refusal of binary_cross_entropy under
// autocast. Thread-safe.
Tensor binaryCrossEntropyBanned(const Tensor& /*self*/, const Tensor& /*target*/,
                                const std::optional<Tensor>& /*weight*/, int64_t /*reduction*/) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  "
              "binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NPU_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(NPU_AUTOCAST_LOWER_PRECISION_FP)
  AT_FORALL_FP32(NPU_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NPU_AUTOCAST_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binaryCrossEntropyBanned));
#undef NPU_AUTOCAST_LOWER_PRECISION_FP
#undef NPU_AUTOCAST_FP32
#undef NPU_AUTOCAST_FP32_SET_OPT_DTYPE
#undef NPU_AUTOCAST_PROMOTE
}

}  // namespace
}  // namespace c10_npu::aten
