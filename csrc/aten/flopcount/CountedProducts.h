// Which ops of the generic op path the FLOP counter counts (the matrix
// products torch_npu counts: mm, addmm, bmm, baddbmm, with their in-place and
// out= variants), and their operands. Layer: ops; used by the observed op
// path (Note [Op observers]).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <optional>

namespace c10_npu::aten {

// The two operands of a counted product and its formula, taken before the op
// runs (the op consumes its arguments) and evaluated after it succeeded.
struct CountedProduct {
  int64_t (*formula)(const at::Tensor&, const at::Tensor&);
  at::Tensor a;
  at::Tensor b;

  int64_t flops() const { return formula(a, b); }
};

// The counted product of `op` called with `args`, or nullopt for an op that
// is not counted. Thread-safe.
std::optional<CountedProduct> countedProduct(const c10::OperatorHandle& op,
                                             c10::ArrayRef<c10::IValue> args);

}  // namespace c10_npu::aten
