// Walking the boxed arguments of an op on the generic op path (see
// AsyncFallback.cpp): which values are npu tensors, and mapping them to their
// meta twins or CPU aliases. Internal to csrc/aten.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <ATen/core/operator_name.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <string>
#include <vector>

namespace c10_npu::aten::detail {

using c10::IValue;
using Stack = std::vector<IValue>;
// The arguments an op task captures: inline up to a typical op's count, so
// that the host makes no allocation an executor frees (Note [Op tasks are
// recycled, not malloc'd] in OpLauncher.h).
using TaskArgs = c10::SmallVector<IValue, 6>;

constexpr c10::DispatchKeySet kCpuKeys(c10::DispatchKey::CPU);
constexpr c10::DispatchKeySet kMetaKeys(c10::DispatchKey::Meta);

// Thread-safe (all functions here read only their arguments).
inline bool isNpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

inline bool isOptionalTensorType(const c10::TypePtr& t) {
  auto opt = t->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == c10::TypeKind::TensorType;
}

// Maps every npu tensor inside an IValue through `fn`, and npu devices to
// `deviceTo` (left alone if nullopt).
template <typename TensorFn>
IValue mapTensors(const IValue& v, const TensorFn& fn, std::optional<c10::DeviceType> deviceTo) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return isNpu(t) ? IValue(fn(t)) : v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(isNpu(t) ? fn(t) : t);
    return IValue(out);
  }
  if (v.isList() && v.toListRef().size() > 0 && v.type()->cast<c10::ListType>() &&
      isOptionalTensorType(v.type()->cast<c10::ListType>()->getElementType())) {
    c10::List<std::optional<at::Tensor>> out;
    for (const IValue& e : v.toListRef()) {
      if (e.isTensor()) {
        const at::Tensor& t = e.toTensor();
        out.push_back(isNpu(t) ? std::optional<at::Tensor>(fn(t)) : std::optional<at::Tensor>(t));
      } else {
        out.push_back(std::nullopt);
      }
    }
    return IValue(out);
  }
  if (deviceTo && v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
    return IValue(c10::Device(*deviceTo));
  }
  return v;
}

// Calls fn on every npu tensor inside an IValue.
template <typename Fn>
void forEachNpuTensor(const IValue& v, const Fn& fn) {
  if (v.isTensor()) {
    if (isNpu(v.toTensor())) fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (isNpu(t)) fn(t);
    }
  } else if (v.isList()) {
    for (const IValue& e : v.toListRef()) {
      if (e.isTensor() && isNpu(e.toTensor())) fn(e.toTensor());
    }
  }
}

// The name under which torch::Library::impl registers a kernel for `name`:
// "aten::add.Tensor", or "aten::relu" without an overload.
inline std::string qualifiedName(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// Maps every tensor among an op's results (tensors and tensor lists) through
// fn, in place.
template <typename Fn>
void mapResultTensors(Stack& results, const Fn& fn) {
  for (IValue& v : results) {
    if (v.isTensor()) {
      v = fn(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) out.push_back(fn(t));
      v = IValue(out);
    }
  }
}

// Replaces the op's nargs arguments on the stack by its results. Not
// thread-safe (the stack is the caller's).
inline void replaceArgsWithResults(Stack* stack, size_t nargs, Stack& results) {
  stack->erase(stack->end() - nargs, stack->end());
  for (auto& v : results) stack->push_back(std::move(v));
}

}  // namespace c10_npu::aten::detail
