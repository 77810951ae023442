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
// the CPU does, so float16 and bfloat16 are both supported.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace c10_npu::aten {
namespace {

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

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
#undef NPU_AUTOCAST_LOWER_PRECISION_FP
#undef NPU_AUTOCAST_FP32
#undef NPU_AUTOCAST_FP32_SET_OPT_DTYPE
#undef NPU_AUTOCAST_PROMOTE
}

}  // namespace
}  // namespace c10_npu::aten
