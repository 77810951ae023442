// The arguments of a replayed op task; see ReplayArgs.h.
#include "aten/ReplayArgs.h"

#include <ATen/ATen.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "aten/OpLauncher.h"
#include "aten/OpTask.h"
#include "aten/WrappedNumbers.h"

namespace c10_npu::aten::detail {
namespace {

// See Note [Wrapped numbers of pointwise ops] in WrappedNumbers.h.
// Returns whether it promoted any.
bool promoteWrappedNumbers(const c10::OperatorHandle& op, Stack& stack) {
  const std::optional<c10::ScalarType> common = pointwisePromotionDtype(op, stack);
  if (!common.has_value()) return false;
  bool promotedAny = false;
  const c10::ScalarType r = *common;
  for (IValue& v : stack) {
    if (!isWrappedNumber(v) || !promotesTo(v.toTensor().scalar_type(), r)) continue;
    const at::Tensor& number = v.toTensor();
    at::Tensor promoted = number.to(r);
    if (!inexactAllowed(r) && !at::equal(promoted.to(number.scalar_type()), number)) continue;
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

Stack ReplayArgs::forRun(c10::ArrayRef<IValue> captured, int generatorArg,
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
    s[generatorArg] =
        cpuGenerator(seed->resolve());  // per replay (Note [Random numbers of captured ops])
  }
  return s;
}

}  // namespace c10_npu::aten::detail
