// Output metadata from meta kernels, and its cache; see OutputMetadata.h.
#include "aten/OutputMetadata.h"

#include <ATen/ops/empty_strided.h>
#include <c10/core/DefaultDtype.h>

#include <mutex>
#include <shared_mutex>
#include <string>

namespace c10_npu::aten::detail {
namespace {

constexpr size_t kMaxCachedSignaturesPerOp = 4096;

template <typename T>
void put(std::string& key, const T& x) {
  key.append(reinterpret_cast<const char*>(&x), sizeof(x));
}

void appendTensorKey(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back('u');
    return;
  }
  key.push_back(isNpu(t) ? 'T' : 't');
  put(key, static_cast<int8_t>(t.scalar_type()));
  // A wrapped number (a Python scalar turned tensor) takes part in type
  // promotion differently from a 0-dim tensor of the same dtype.
  put(key, static_cast<int8_t>(t.is_conj() | (t.is_neg() << 1) |
                               (t.unsafeGetTensorImpl()->is_wrapped_number() << 2)));
  put(key, static_cast<int32_t>(t.dim()));
  for (int64_t d : t.sizes()) put(key, d);
  for (int64_t d : t.strides()) put(key, d);
}

// Serialises a non-list argument for the cache key; false if it cannot be.
bool appendScalarKey(std::string& key, const IValue& v) {
  if (v.isTensor()) {
    appendTensorKey(key, v.toTensor());
  } else if (v.isNone()) {
    key.push_back('n');
  } else if (v.isInt()) {
    key.push_back('i');
    put(key, v.toInt());
  } else if (v.isDouble()) {
    key.push_back('d');
    put(key, v.toDouble());
  } else if (v.isBool()) {
    key.push_back('b');
    put(key, v.toBool());
  } else if (v.isSymInt()) {
    key.push_back('i');
    put(key, v.toSymInt().expect_int());
  } else if (v.isString()) {
    key.push_back('s');
    key.append(v.toStringRef());
    key.push_back('\0');
  } else if (v.isDevice()) {
    key.push_back('v');
    put(key, static_cast<int8_t>(v.toDevice().type()));
  } else if (v.isGenerator()) {
    key.push_back('g');
  } else if (v.isComplexDouble()) {
    key.push_back('c');
    put(key, v.toComplexDouble());
  } else {
    return false;
  }
  return true;
}

// Serialises an argument for the cache key; false if it cannot be.
bool appendKey(std::string& key, const IValue& v) {
  if (v.isIntList()) {
    key.push_back('I');
    for (int64_t x : v.toIntList()) put(key, x);
  } else if (v.isDoubleList()) {
    key.push_back('D');
    for (double x : v.toDoubleList()) put(key, x);
  } else if (v.isBoolList()) {
    key.push_back('B');
    for (bool x : v.toBoolList()) put(key, x);
  } else if (v.isTensorList()) {
    key.push_back('L');
    for (const at::Tensor& t : v.toTensorVector()) appendTensorKey(key, t);
  } else if (v.isList()) {
    key.push_back('l');
    for (const IValue& e : v.toListRef()) {
      if (!appendKey(key, e)) return false;
    }
  } else {
    return appendScalarKey(key, v);
  }
  key.push_back(';');
  return true;
}

TensorMeta tensorMeta(const at::Tensor& t) {
  if (!t.defined()) return TensorMeta{false, {}, {}, 0, c10::ScalarType::Undefined, false, false};
  return TensorMeta{
      true,        t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type(),
      t.is_conj(), t.is_neg()};
}

// The meta twin of an npu argument: same sizes, strides, dtype and conj/neg
// bits (meta kernels of conj-aware ops and views read the bits). The storage
// offset is not kept: see Note [Views that change dtype or bits].
at::Tensor toMeta(const at::Tensor& t) {
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(),
                                   at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
  if (t.is_conj()) m._set_conj(true);
  if (t.is_neg()) m._set_neg(true);
  return m;
}

// The cache key of a call: see Note [Output metadata cache]. False if an
// argument cannot be serialised. `key` is overwritten.
bool buildKey(std::string& key, const Stack& args) {
  key.clear();
  // Global state that meta kernels read: the default dtype decides the
  // result dtype of ops such as angle() or logit() on integer tensors.
  key.push_back(static_cast<char>(c10::get_default_dtype_as_scalartype()));
  bool cacheable = true;
  for (size_t i = 0; i < args.size() && cacheable; ++i) cacheable = appendKey(key, args[i]);
  return cacheable;
}

std::shared_ptr<const MetaResult> cached(const OpInfo& info, const std::string& key) {
  std::shared_lock<std::shared_mutex> lock(info.cacheMutex);
  auto it = info.cache.find(key);
  return it != info.cache.end() ? it->second : nullptr;
}

void store(const OpInfo& info, const std::string& key, std::shared_ptr<const MetaResult> result) {
  std::unique_lock<std::shared_mutex> lock(info.cacheMutex);
  if (info.cache.size() >= kMaxCachedSignaturesPerOp) info.cache.clear();
  info.cache.emplace(key, std::move(result));
}

// Runs the meta kernel of `computeOp` (the op, or its functional variant)
// on meta twins of the first computeArgs arguments; nullptr if it raised.
std::shared_ptr<const MetaResult> runMetaKernel(const c10::OperatorHandle& op,
                                                const c10::OperatorHandle& computeOp,
                                                const Stack& args, size_t computeArgs,
                                                const OpInfo& info) {
  Stack meta;
  meta.reserve(computeArgs);
  for (size_t i = 0; i < computeArgs; ++i) {
    if (static_cast<int>(i) == info.generatorArg) {
      meta.emplace_back();  // meta kernels draw no numbers
      continue;
    }
    meta.push_back(mapTensors(args[i], toMeta, c10::DeviceType::Meta));
  }
  try {
    // See Note [C++ meta kernels].
    if (info.metaKernel.has_value()) {
      info.metaKernel->callBoxed(computeOp, kMetaKeys, &meta);
    } else {
      computeOp.redispatchBoxed(kMetaKeys, &meta);
    }
  } catch (const std::exception&) {
    // No meta kernel, a data-dependent shape, or a user error that the CPU
    // kernel will report the same way. (Meta kernels written in Python
    // throw torch's python_error, not c10::Error.)
    return nullptr;
  }
  const auto& schema = op.schema();
  TORCH_INTERNAL_ASSERT(meta.size() == schema.returns().size(), "meta kernel of ", schema.name(),
                        " returned ", meta.size(), " values, the schema says ",
                        schema.returns().size());
  auto computed = std::make_shared<MetaResult>();
  for (const IValue& m : meta) {
    std::vector<TensorMeta> tensors;
    if (m.isTensor()) {
      tensors.push_back(tensorMeta(m.toTensor()));
    } else if (m.isTensorList()) {
      for (const at::Tensor& t : m.toTensorVector()) tensors.push_back(tensorMeta(t));
    }
    computed->returns.push_back(std::move(tensors));
  }
  return computed;
}

}  // namespace

std::shared_ptr<const MetaResult> outputMetadata(const c10::OperatorHandle& op, const Stack& args,
                                                 const OpInfo& info) {
  thread_local std::string key;
  const bool cacheable = buildKey(key, args);
  if (cacheable) {
    if (auto hit = cached(info, key)) return hit;
  }
  // See Note [out= ops run functionally].
  const bool viaFunctional = info.functionalVariant.has_value();
  const size_t computeArgs = viaFunctional ? args.size() - info.numOutArgs : args.size();
  const c10::OperatorHandle& computeOp = viaFunctional ? *info.functionalVariant : op;
  auto computed = runMetaKernel(op, computeOp, args, computeArgs, info);
  if (computed && cacheable) store(info, key, computed);
  return computed;
}

}  // namespace c10_npu::aten::detail
