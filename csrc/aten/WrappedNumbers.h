// Python numbers of pointwise ops, converted to the op's dtype before the
// kernel runs. Internal to csrc/aten; used by the op tasks (DeferredArgs.h,
// ReplayArgs.cpp).
//
// Note [Wrapped numbers of pointwise ops]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A Python number passed where an op takes a tensor (`x.mul_(1.5)`,
// `x + 1`) reaches the kernel as a 0-dim "wrapped number" tensor of dtype
// double (or int64, bool, complex double). PyTorch's pointwise CPU kernels
// are TensorIterator kernels that promote their inputs to the common dtype:
// at every call they convert the wrapped number with `.to(common dtype)`,
// an allocation, a copy kernel and a TensorIterator of its own — for a
// small op, more than half of its kernel's work. An op task makes the
// number in the common dtype instead (a recorded task once, when it is
// recorded — Note [Replayed op tasks build their arguments once]; an eager
// task when it makes its arguments — Note [Aliases are made where the
// kernel runs]), with the conversion `.to()` would make, and keeps it
// marked as a wrapped number, so that type promotion treats it as before (a
// wrapped number contributes its category, not its dtype). The kernel then
// finds the input in the common dtype and converts nothing. It is done only
// where the result is the one the kernel would have made:
//  - the op is tagged pointwise, and every other tensor among its inputs
//    has one dtype R, which is therefore the common dtype TensorIterator
//    computes, whatever the default dtype is, provided the wrapped number's
//    category (bool < integral < floating < complex) is not above R's;
//  - R is float, double or one of their complex types, so that an op that
//    computes integers in floating point (true division) has R as its
//    common dtype too, and R is the type the kernel computes in; or the
//    number converts to R exactly (it converts back to itself), so that any
//    later conversion of it gives what converting the original would
//    (recorded tasks only; eager tasks convert only to those four types).
//    Not Half, BFloat16 or ComplexHalf: their pointwise kernels compute in
//    float and read a wrapped number's original value, not its converted
//    one, so `x_half * 1e-4` would lose bits converted to Half first.
// A pointwise kernel that checks a wrapped number's dtype instead of
// promoting it (lerp.Tensor, heaviside reject a double weight for float
// inputs) cannot tell an exact-dtype argument from a promoted one: a call
// with promoted numbers that fails is therefore repeated with the numbers as
// captured (OpTask.cpp), so that its error is the op's own.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>

#include <optional>

#include "aten/OpArgs.h"

namespace c10_npu::aten::detail {

// Thread-safe (all functions here read only their arguments).

// Whether `v` is a wrapped number (a defined tensor so marked).
bool isWrappedNumber(const IValue& v);

// R of Note [Wrapped numbers of pointwise ops] for `op` called with `stack`
// (npu tensors or their CPU aliases alike): the op is pointwise, the stack
// holds a wrapped number, and every other tensor input has dtype R, of at
// most complex category. Otherwise nullopt.
std::optional<c10::ScalarType> pointwisePromotionDtype(const c10::OperatorHandle& op,
                                                       const Stack& stack);

// Whether a wrapped number of dtype `number` is to be converted to R: it is
// not R already and its category is not above R's.
bool promotesTo(c10::ScalarType number, c10::ScalarType r);

// Whether any number may be converted to R, exactly or not: R is float,
// double, complex float or complex double.
bool inexactAllowed(c10::ScalarType r);

}  // namespace c10_npu::aten::detail
