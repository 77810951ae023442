// See DeferredArgs.h.
#include "aten/DeferredArgs.h"

#include <ATen/ScalarOps.h>
#include <c10/util/complex.h>

#include <new>
#include <type_traits>

#include "aten/WrappedNumbers.h"

namespace c10_npu::aten::detail {

static_assert(std::is_trivially_copyable_v<DeferredArgs>,
              "a task holding DeferredArgs is moved by copying bytes");

// The binding (torch/csrc/utils/python_arg_parser) wraps Python numbers as
// 0-dim CPU tensors of these dtypes; other wrapped numbers are captured as
// they are.
bool DeferredArgs::readWrappedNumber(const at::Tensor& t, WrappedNumber& number) {
  if (!t.unsafeGetTensorImpl()->is_wrapped_number() || !t.device().is_cpu() || !t.has_storage() ||
      t.storage().data() == nullptr) {
    return false;
  }
  const void* p = t.const_data_ptr();
  number = WrappedNumber{t.scalar_type(), c10::ScalarType::Undefined, 0.0, 0.0, 0};
  switch (number.type) {
    case c10::ScalarType::Double:
      number.real = *static_cast<const double*>(p);
      return true;
    case c10::ScalarType::ComplexDouble: {
      const auto& z = *static_cast<const c10::complex<double>*>(p);
      number.real = z.real();
      number.imag = z.imag();
      return true;
    }
    case c10::ScalarType::Long:
      number.integral = *static_cast<const int64_t*>(p);
      return true;
    case c10::ScalarType::Bool:
      number.integral = *static_cast<const bool*>(p) ? 1 : 0;
      return true;
    default:
      return false;
  }
}

at::Tensor DeferredArgs::makeWrappedNumber(const WrappedNumber& number, bool promote) {
  c10::Scalar value;
  switch (number.type) {
    case c10::ScalarType::Double:
      value = c10::Scalar(number.real);
      break;
    case c10::ScalarType::ComplexDouble:
      value = c10::Scalar(c10::complex<double>(number.real, number.imag));
      break;
    case c10::ScalarType::Bool:
      value = c10::Scalar(number.integral != 0);
      break;
    default:
      value = c10::Scalar(number.integral);
  }
  // scalar_tensor_static converts the value as `.to()` converts the number
  // (static_cast; Note [Wrapped numbers of pointwise ops]).
  const bool converted = promote && number.promotedType != c10::ScalarType::Undefined;
  at::Tensor t = at::detail::scalar_tensor_static(
      value, converted ? number.promotedType : number.type, at::kCPU);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

bool DeferredArgs::take(Stack& stack, size_t index, bool aliasable,
                        std::optional<c10::ScalarType> promoteTo) {
  IValue& v = stack[index];
  if (count_ == kMaxArgs || !v.isTensor() || !v.toTensor().defined()) return false;
  const at::Tensor& t = v.toTensor();
  Entry& e = entries_[count_];
  e.index = static_cast<uint32_t>(index);
  if (t.device().type() == c10::DeviceType::PrivateUse1) {
    if (!aliasable || !AliasSnapshot::possible(t)) return false;
    e.isAlias = true;
    ::new (&e.alias) AliasSnapshot(t);
  } else if (readWrappedNumber(t, e.number)) {
    e.isAlias = false;
    // Eager tasks convert only where that cannot be inexact (see the note).
    if (promoteTo.has_value() && inexactAllowed(*promoteTo) &&
        promotesTo(e.number.type, *promoteTo)) {
      e.number.promotedType = *promoteTo;
      promotes_ = true;
    }
  } else {
    return false;
  }
  ++count_;
  v = IValue();
  return true;
}

bool DeferredArgs::takeOutputs(const std::vector<at::Tensor>& fresh) {
  if (fresh.empty() || fresh.size() > kMaxOutputs) return false;
  for (const at::Tensor& f : fresh) {
    if (f.defined() && !AliasSnapshot::possible(f)) return false;
  }
  for (const at::Tensor& f : fresh) {
    outputs_[outputCount_++] =
        f.defined() ? std::optional<AliasSnapshot>(AliasSnapshot(f)) : std::nullopt;
  }
  return true;
}

void DeferredArgs::fill(Stack& kernelArgs, bool promote) const {
  for (size_t i = 0; i < count_; ++i) {
    const Entry& e = entries_[i];
    kernelArgs[e.index] = e.isAlias ? e.alias.alias() : makeWrappedNumber(e.number, promote);
  }
}

std::vector<at::Tensor> DeferredArgs::outputs() const {
  std::vector<at::Tensor> aliases;
  aliases.reserve(outputCount_);
  for (size_t i = 0; i < outputCount_; ++i) {
    aliases.push_back(outputs_[i].has_value() ? outputs_[i]->alias() : at::Tensor());
  }
  return aliases;
}

}  // namespace c10_npu::aten::detail
