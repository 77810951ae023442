// C++ meta kernels for common ops that PyTorch gives a Python Meta kernel
// only (no at::meta:: function): relu, abs, where, the var/std family,
// native_batch_norm in training (which layer_norm runs on backends without a
// kernel of their own), index_select and embedding_dense_backward (an
// embedding's forward and backward) and mse_loss_backward. Each computes the metadata of the op's
// CPU kernel's result; an argument it does not handle raises, which sends the call to the
// synchronous path, where the CPU kernel decides. See Note [C++ meta kernels] in MetaFunctions.h.
// Also checks that PyTorch's C++ meta functions leave to the kernels (Note [Argument checks
// the meta kernels leave to the kernel]), which take precedence over those functions.
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/addmv_meta_dispatch.h>
#include <ATen/ops/baddbmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/clamp_min_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/result_type.h>

#include <bitset>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "aten/MetaFunctionEntry.h"

namespace c10_npu::aten::detail {
namespace {

// relu is clamp_min(self, 0) on CPU.
at::Tensor relu(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::meta::clamp_min(self, 0);
}

at::Tensor& relu_(at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::meta::clamp_min_(self, 0);
}

// A unary TensorIterator op on CPU; complex inputs give a real result laid
// out like the input, which the dispatcher's Meta kernel computes.
at::Tensor abs(const at::Tensor& self) {
  if (self.is_complex()) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("aten::abs", "")
                               .typed<at::Tensor(const at::Tensor&)>();
    return op.redispatch(c10::DispatchKeySet(c10::DispatchKey::Meta), self);
  }
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_owned_output(at::Tensor())
                                .add_const_input(self)
                                .check_all_same_dtype(true)
                                .build();
  return iter.output();
}

// where(condition, self, other): a TensorIterator over the three, with the
// result type of self and other.
at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .check_all_same_dtype(false)
                                .declare_static_dtype(at::result_type(self, other))
                                .add_owned_output(at::Tensor())
                                .add_const_input(condition)
                                .add_const_input(self)
                                .add_const_input(other)
                                .build();
  return iter.output();
}

// The shape of a reduction of `self` over `dim` (all dimensions if none or
// empty), as CPU reductions allocate it (contiguous).
std::vector<int64_t> reducedShape(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                  bool keepdim) {
  const int64_t ndim = self.dim();
  std::bitset<64> mask;
  if (!dim.has_value() || dim->empty()) {
    mask.set();
  } else {
    for (int64_t d : *dim) {
      const int64_t wrapped = at::maybe_wrap_dim(d, ndim);
      TORCH_CHECK(!mask[wrapped], "dim ", wrapped, " appears multiple times in the list of dims");
      mask.set(wrapped);
    }
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!mask[d]) {
      shape.push_back(self.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return shape;
}

at::Tensor varianceLike(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "std and var only support floating point and complex dtypes");
  TORCH_CHECK(self.dim() <= 64, "reductions of more than 64 dimensions are not handled here");
  return at::empty(reducedShape(self, dim, keepdim),
                   self.options().dtype(c10::toRealValueType(self.scalar_type())));
}

at::Tensor var(const at::Tensor& self, at::OptionalIntArrayRef dim,
               const std::optional<at::Scalar>& /*correction*/, bool keepdim) {
  return varianceLike(self, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> varMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& /*correction*/,
                                           bool keepdim) {
  at::Tensor variance = varianceLike(self, dim, keepdim);
  return {variance, at::empty(variance.sizes(), self.options())};
}

// The input's shape with `dim` sized as the index (contiguous, like the CPU
// kernel's resized output). Index values are data: the CPU kernel checks them.
at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[at::maybe_wrap_dim(dim, self.dim())] = index.numel();
  return at::empty(shape, self.options());
}

// [num_weights, embedding size] in the gradient's dtype, as the CPU kernel
// allocates it.
at::Tensor embeddingDenseBackward(const at::Tensor& gradOutput, const at::Tensor& /*indices*/,
                                  int64_t numWeights, int64_t /*paddingIdx*/,
                                  bool /*scaleGradByFreq*/) {
  TORCH_CHECK(gradOutput.dim() >= 1, "embedding_dense_backward: a 0-dim gradient is left to ",
              "the CPU kernel");
  return at::empty({numWeights, gradOutput.size(-1)}, gradOutput.options());
}

bool fitsChannels(const std::optional<at::Tensor>& t, int64_t channels) {
  return !t.has_value() || !t->defined() || (t->numel() == channels && t->is_contiguous());
}

// Training on a contiguous input with per-channel parameters (layer_norm's
// case): the output like the input, the saved mean and inverse deviation per
// channel in the op-math dtype. Anything else (eval mode, other layouts, bad
// parameters) is left to the dispatcher's Meta kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeBatchNorm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& runningMean,
    const std::optional<at::Tensor>& runningVar, bool training, double momentum, double eps) {
  const int64_t channels = input.dim() >= 2 ? input.size(1) : -1;
  if (!training || channels < 0 || !input.is_contiguous() || !fitsChannels(weight, channels) ||
      !fitsChannels(bias, channels) || !fitsChannels(runningMean, channels) ||
      !fitsChannels(runningVar, channels)) {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("aten::native_batch_norm", "")
            .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                const at::Tensor&, const std::optional<at::Tensor>&,
                const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                const std::optional<at::Tensor>&, bool, double, double)>();
    return op.redispatch(c10::DispatchKeySet(c10::DispatchKey::Meta), input, weight, bias,
                         runningMean, runningVar, training, momentum, eps);
  }
  const auto stats = input.options().dtype(at::toOpMathType(input.scalar_type()));
  return {at::empty(input.sizes(), input.options()), at::empty({channels}, stats),
          at::empty({channels}, stats)};
}

// Allocated like its input (contiguous), when grad_output and target
// broadcast to the input's shape with its dtype; anything else goes to the
// CPU kernel.
at::Tensor mseLossBackward(const at::Tensor& gradOutput, const at::Tensor& self,
                           const at::Tensor& target, int64_t /*reduction*/) {
  TORCH_CHECK(
      gradOutput.scalar_type() == self.scalar_type() && target.scalar_type() == self.scalar_type(),
      "mse_loss_backward: mixed dtypes are left to the CPU kernel");
  TORCH_CHECK(at::infer_size(at::infer_size(self.sizes(), target.sizes()), gradOutput.sizes()) ==
                  self.sizes(),
              "mse_loss_backward: broadcasting to another shape is left to the CPU kernel");
  return at::empty(self.sizes(), self.options());
}

// Note [Argument checks the meta kernels leave to the kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Some of PyTorch's meta functions size a result without checking what the
// CPU (and CUDA) kernel checks on the host before it computes anything: the
// matmul family accepts operands of different dtypes, _assert_async a tensor
// of any size. On npu the kernel runs in a task, so such a call would be
// queued and fail at the next synchronize instead of raising at the call as
// on CPU and CUDA. These meta kernels refuse those arguments, which sends the
// call to the synchronous path, where the CPU kernel raises its own message at
// the call (or computes the result, where it accepts them).

void requireSameDtype(std::initializer_list<const at::Tensor*> operands) {
  const at::ScalarType first = (*operands.begin())->scalar_type();
  for (const at::Tensor* t : operands) {
    TORCH_CHECK(t->scalar_type() == first, "mixed dtypes are left to the CPU kernel");
  }
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  requireSameDtype({&self, &mat2});
  return at::meta::mm(self, mat2);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  requireSameDtype({&self, &mat2});
  return at::meta::bmm(self, mat2);
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  requireSameDtype({&self, &mat1, &mat2});
  return at::meta::addmm(self, mat1, mat2, beta, alpha);
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  requireSameDtype({&self, &batch1, &batch2});
  return at::meta::baddbmm(self, batch1, batch2, beta, alpha);
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  requireSameDtype({&self, &mat, &vec});
  return at::meta::addmv(self, mat, vec, beta, alpha);
}

// The value is checked by the task, like CUDA's device-side assert; only
// the size is the host's to check.
void assertAsync(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "_assert_async of a tensor without exactly one element is left "
                                 "to the CPU kernel");
}

}  // namespace

const MetaFunctionEntry kHandwrittenMetaFunctions[] = {
    metaFunction<at::Tensor(const at::Tensor&)>("relu", &relu),
    metaFunction<at::Tensor&(at::Tensor&)>("relu_", &relu_),
    metaFunction<at::Tensor(const at::Tensor&)>("abs", &abs),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>("where",
                                                                                      &where),
    metaFunction<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef,
                            const std::optional<at::Scalar>&, bool)>("var", &var),
    metaFunction<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef,
                            const std::optional<at::Scalar>&, bool)>("std", &var),
    metaFunction<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, at::OptionalIntArrayRef,
                                                    const std::optional<at::Scalar>&, bool)>(
        "var_mean", &varMean),
    metaFunction<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, at::OptionalIntArrayRef,
                                                    const std::optional<at::Scalar>&, bool)>(
        "std_mean", &varMean),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t)>(
        "mse_loss_backward", &mseLossBackward),
    metaFunction<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
        const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
        const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, bool, double, double)>(
        "native_batch_norm", &nativeBatchNorm),
    metaFunction<at::Tensor(const at::Tensor&, int64_t, const at::Tensor&)>("index_select",
                                                                            &indexSelect),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, bool)>(
        "embedding_dense_backward", &embeddingDenseBackward),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&)>("mm", &mm),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&)>("bmm", &bmm),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Scalar&, const at::Scalar&)>("addmm", &addmm),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Scalar&, const at::Scalar&)>("baddbmm", &baddbmm),
    metaFunction<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Scalar&, const at::Scalar&)>("addmv", &addmv),
    metaFunction<void(const at::Tensor&)>("_assert_async", &assertAsync),
};

const size_t kNumHandwrittenMetaFunctions =
    sizeof(kHandwrittenMetaFunctions) / sizeof(kHandwrittenMetaFunctions[0]);

}  // namespace c10_npu::aten::detail
