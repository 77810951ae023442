// The arguments of a replayed op task; see ReplayArgs.h.
#include "aten/ReplayArgs.h"

#include <ATen/ATen.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "aten/OpLauncher.h"
#include "aten/OpTask.h"

namespace c10_npu::aten::detail {
namespace {

// Note [Wrapped numbers of replayed pointwise ops]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A Python number passed where an op takes a tensor (`x.mul_(1.5)`,
// `x + 1`) reaches the kernel as a 0-dim "wrapped number" tensor of dtype
// double (or int64, bool, complex double). PyTorch's pointwise CPU kernels
// are TensorIterator kernels that promote their inputs to the common dtype:
// at every call they convert the wrapped number with `.to(common dtype)`,
// an allocation, a copy kernel and a TensorIterator of its own — for a
// small op, more than half of its replay. A recorded task does that
// conversion once, when it is recorded, with the same `.to()`, and keeps the
// result marked as a wrapped number, so that type promotion treats it as
// before (a wrapped number contributes its category, not its dtype). The
// kernel then finds the input in the common dtype and converts nothing. It
// is done only where the result is the one the kernel would have made:
//  - the op is tagged pointwise, and every other tensor among its inputs
//    has one dtype R, which is therefore the common dtype TensorIterator
//    computes, whatever the default dtype is, provided the wrapped number's
//    category (bool < integral < floating < complex) is not above R's;
//  - R is floating or complex, so that an op that computes integers in
//    floating point (true division) has R as its common dtype too; or the
//    number converts to R exactly (it converts back to itself), so that any
//    later conversion of it gives what converting the original would.
// A pointwise kernel that checks a wrapped number's dtype instead of
// promoting it (lerp.Tensor, heaviside reject a double weight for float
// inputs) cannot tell an exact-dtype argument from a promoted one: a
// replayed call that fails is therefore repeated with the arguments as
// captured (OpTask.cpp), so that its error is the op's own.
int category(c10::ScalarType t) {
  if (t == c10::ScalarType::Bool) return 0;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return 1;
  if (c10::isFloatingType(t)) return 2;
  if (c10::isComplexType(t)) return 3;
  return 4;  // quantized, bits, ...: never promoted
}

bool isWrappedNumber(const IValue& v) {
  return v.isTensor() && v.toTensor().defined() &&
         v.toTensor().unsafeGetTensorImpl()->is_wrapped_number();
}

// The one dtype of the op's other tensor inputs, if they have one.
std::optional<c10::ScalarType> commonInputDtype(const Stack& stack) {
  std::optional<c10::ScalarType> common;
  for (const IValue& v : stack) {
    if (v.isTensorList() || (v.isList() && !v.isIntList() && !v.isDoubleList() &&
                             !v.isBoolList())) {
      return std::nullopt;  // tensors in lists: leave the op alone
    }
    if (!v.isTensor() || !v.toTensor().defined() || isWrappedNumber(v)) continue;
    const c10::ScalarType t = v.toTensor().scalar_type();
    if (common.has_value() && *common != t) return std::nullopt;
    common = t;
  }
  return common;
}

// See Note [Wrapped numbers of replayed pointwise ops].
// Returns whether it promoted any.
bool promoteWrappedNumbers(const c10::OperatorHandle& op, Stack& stack) {
  bool any = false;
  for (const IValue& v : stack) any |= isWrappedNumber(v);
  if (!any || !op.hasTag(at::Tag::pointwise)) return false;
  const std::optional<c10::ScalarType> common = commonInputDtype(stack);
  if (!common.has_value() || category(*common) > 3) return false;
  bool promotedAny = false;
  const c10::ScalarType r = *common;
  const bool inexactAllowed = c10::isFloatingType(r) || c10::isComplexType(r);
  for (IValue& v : stack) {
    if (!isWrappedNumber(v)) continue;
    const at::Tensor& number = v.toTensor();
    if (number.scalar_type() == r || category(number.scalar_type()) > category(r)) continue;
    at::Tensor promoted = number.to(r);
    if (!inexactAllowed && !at::equal(promoted.to(number.scalar_type()), number)) continue;
    promoted.unsafeGetTensorImpl()->set_wrapped_number(true);
    v = IValue(std::move(promoted));
    promotedAny = true;
  }
  return promotedAny;
}

}  // namespace

ReplayArgs::ReplayArgs(const c10::OperatorHandle& op, const Stack& captured, size_t n) {
  stack_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const IValue& v = captured[i];
    if (v.isTensor() && isNpu(v.toTensor()) && v.toTensor().has_storage()) {
      // Held by reference: see Note [Replayed op tasks build their arguments once].
      const at::Tensor& heldTensor = v.toTensor();
      held_.push_back(HeldAlias{i, heldTensor.storage().data(), heldTensor.storage().nbytes()});
      stack_.emplace_back(kernelView(heldTensor));
      continue;
    }
    // npu tensors in lists, or without storage: mapped at every run, as an
    // eager task maps them (and fails where it would fail).
    bool npuInside = false;
    forEachNpuTensor(v, [&](const at::Tensor&) { npuInside = true; });
    if (npuInside) {
      perRun_.push_back(i);
      stack_.push_back(v);
      continue;
    }
    stack_.push_back(mapTensors(v, cpuAlias, c10::DeviceType::CPU));
  }
  promoted_ = promoteWrappedNumbers(op, stack_);
}

Stack ReplayArgs::forRun(const Stack& captured, int generatorArg,
                         const std::optional<SeedReservation>& seed) const {
  Stack s = stack_;
  for (const HeldAlias& h : held_) {
    const at::Tensor& heldTensor = captured[h.index].toTensor();
    const c10::Storage& storage = heldTensor.storage();
    if (storage.data() != h.data || storage.nbytes() != h.nbytes) {
      s[h.index] = kernelView(heldTensor);  // the storage has new memory
    }
  }
  for (size_t i : perRun_) s[i] = mapTensors(captured[i], cpuAlias, c10::DeviceType::CPU);
  if (generatorArg >= 0 && static_cast<size_t>(generatorArg) < s.size()) {
    s[generatorArg] = cpuGenerator(seed->resolve());  // per replay (Note [Random numbers of captured ops])
  }
  return s;
}

}  // namespace c10_npu::aten::detail
