// Batch norm's eval-mode outputs as the CPU kernel returns them.
//
// Note [Placeholder outputs of batch norm in eval mode]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// native_batch_norm and _native_batch_norm_legit return, besides the
// output, save_mean and save_invstd: the batch statistics that the backward
// reuses in training. In eval mode (training = false) there are none, and
// the two outputs are placeholders whose shape PyTorch leaves to the device:
// the CPU kernel returns empty tensors, the meta kernel (and CUDA) tensors
// of C uninitialised elements. The generic path allocates outputs from the
// meta kernel, so npu returned C uninitialised elements where CPU returns
// none. These kernels run the op through the generic path and, in eval
// mode, return empty placeholders as CPU does: what a program sees is CPU's
// result, and no uninitialised memory is handed out. (The backward in eval
// mode reads the running statistics, never the placeholders.)
#include <ATen/ATen.h>
#include <torch/library.h>

#include <initializer_list>

#include "aten/AsyncFallback.h"
#include "core/NPUException.h"

namespace c10_npu::aten {
namespace {

using detail::Stack;

// Boxed kernel of both ops (same arguments; returns output, save_mean,
// save_invstd). See Note [Placeholder outputs of batch norm in eval mode].
void batchNorm(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, Stack* stack) {
  const auto& schema = op.schema();
  const std::optional<int> trainingArg = schema.argumentIndexWithName("training");
  TORCH_INTERNAL_ASSERT(trainingArg.has_value() && schema.returns().size() == 3,
                        "unexpected schema of ", schema.name(), NPU_ERROR_SUFFIX);
  const size_t nargs = schema.arguments().size();
  const bool training = (*stack)[stack->size() - nargs + *trainingArg].toBool();
  detail::runGenericOp(op, stack);
  if (training) return;
  for (size_t r : {1, 2}) {
    c10::IValue& placeholder = (*stack)[stack->size() - 3 + r];
    placeholder = at::empty({0}, placeholder.toTensor().options());
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", torch::CppFunction::makeFromBoxedFunction<&batchNorm>());
  m.impl("_native_batch_norm_legit", torch::CppFunction::makeFromBoxedFunction<&batchNorm>());
}

}  // namespace c10_npu::aten
