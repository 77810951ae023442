// See WrappedNumbers.h.
#include "aten/WrappedNumbers.h"

#include <ATen/core/Tensor.h>

namespace c10_npu::aten::detail {
namespace {

int category(c10::ScalarType t) {
  if (t == c10::ScalarType::Bool) return 0;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return 1;
  if (c10::isFloatingType(t)) return 2;
  if (c10::isComplexType(t)) return 3;
  return 4;  // quantized, bits, ...: never promoted
}

// The one dtype of the op's other tensor inputs, if they have one.
std::optional<c10::ScalarType> commonInputDtype(const Stack& stack) {
  std::optional<c10::ScalarType> common;
  for (const IValue& v : stack) {
    if (v.isTensorList() ||
        (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList())) {
      return std::nullopt;  // tensors in lists: leave the op alone
    }
    if (!v.isTensor() || !v.toTensor().defined() || isWrappedNumber(v)) continue;
    const c10::ScalarType t = v.toTensor().scalar_type();
    if (common.has_value() && *common != t) return std::nullopt;
    common = t;
  }
  return common;
}

}  // namespace

bool isWrappedNumber(const IValue& v) {
  return v.isTensor() && v.toTensor().defined() &&
         v.toTensor().unsafeGetTensorImpl()->is_wrapped_number();
}

std::optional<c10::ScalarType> pointwisePromotionDtype(const c10::OperatorHandle& op,
                                                       const Stack& stack) {
  bool any = false;
  for (const IValue& v : stack) any |= isWrappedNumber(v);
  if (!any || !op.hasTag(at::Tag::pointwise)) return std::nullopt;
  const std::optional<c10::ScalarType> common = commonInputDtype(stack);
  if (!common.has_value() || category(*common) > 3) return std::nullopt;
  return common;
}

bool promotesTo(c10::ScalarType number, c10::ScalarType r) {
  return number != r && category(number) <= category(r);
}

bool inexactAllowed(c10::ScalarType r) {
  // Not the reduced floating types: their kernels compute in float and read
  // a CPU scalar's original value (TensorIteratorBase::original_scalar_value),
  // so a number made in Half would lose bits the kernel keeps.
  return r == c10::ScalarType::Float || r == c10::ScalarType::Double ||
         r == c10::ScalarType::ComplexFloat || r == c10::ScalarType::ComplexDouble;
}

}  // namespace c10_npu::aten::detail
