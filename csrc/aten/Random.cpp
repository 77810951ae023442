// Random ops whose schema takes no Generator argument, so the generic path
// cannot give them the npu generator (their CPU kernels would draw from the
// global CPU generator on an executor thread: not reproducible with
// torch.npu.manual_seed, and racing with the host's own CPU random ops).
// They are composed here from ops that do take a generator, each of which
// runs asynchronously. See Note [Random numbers are reserved at enqueue].
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "core/NPUException.h"

namespace c10_npu::aten {
namespace {

// Same contract as the CPU kernel: mask is bool, kept elements are scaled by
// 1 / (1 - p); in eval mode (train == false) the input passes through.
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p,
                                                 std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p,
              NPU_ERROR_SUFFIX);
  if (!train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) {
    return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor keep = at::empty_like(input).bernoulli_(1 - p);  // npu default generator
  at::Tensor output = input * keep * (1.0 / (1 - p));
  return {output, keep.to(at::kBool)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", nativeDropout); }

}  // namespace c10_npu::aten
