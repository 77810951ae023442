// The generic op path: every ATen op on npu tensors that has no dedicated
// kernel in this folder comes here (a boxed fallback for PrivateUse1) and
// runs asynchronously on the current stream. See Note [Ops run on streams].
//
// Per call, on the calling thread:
//  1. find the op's device (all npu tensors must share it);
//  2. infer output metadata by running the op on meta tensors;
//  3. build outputs: in-place/out= returns are the argument itself; view
//     returns are as_strided views of the viewed argument (no task at all);
//     other returns are fresh npu tensors from the caching allocator;
//  4. queue a task that runs the CPU kernel over the device memory — the
//     op's out= variant when it has one, so the kernel writes straight into
//     the outputs; otherwise the op itself, copying fresh results in.
// Ops whose outputs cannot be known without the data (no meta kernel,
// data-dependent shapes, non-tensor results) take the synchronous path: wait
// for the current stream, run the CPU kernel, copy results to the device.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/OpLauncher.h"
#include "core/ExternalStreams.h"
#include "core/HostSync.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUGenerator.h"

namespace c10_npu::aten {
namespace {

using c10::IValue;
using Stack = std::vector<IValue>;

constexpr c10::DispatchKeySet kCpuKeys(c10::DispatchKey::CPU);
constexpr c10::DispatchKeySet kMetaKeys(c10::DispatchKey::Meta);

bool isNpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// What a return of the op is, from its schema's alias annotations.
enum class ReturnKind : uint8_t { kNew, kMutatedArg, kViewOfArg, kNonTensor };

struct ReturnInfo {
  ReturnKind kind = ReturnKind::kNew;
  int arg = -1;         // argument index for kMutatedArg / kViewOfArg
  bool isList = false;  // Tensor[] return
};

struct MetaResult;

// Per-operator facts derived once from the schema (cached; see opInfo()).
struct OpInfo {
  std::vector<ReturnInfo> returns;
  int generatorArg = -1;  // index of a Generator? argument
  bool allNew = true;     // every return is a fresh tensor
  bool anyNonTensor = false;
  std::optional<c10::OperatorHandle> outVariant;  // op.out with matching args
  // For an out= op (outs are its trailing keyword-only Tensor(a!) arguments,
  // returned in order): its functional counterpart. See Note [out= ops run
  // functionally].
  std::optional<c10::OperatorHandle> functionalVariant;
  size_t numOutArgs = 0;
  // Arguments the op writes (alias annotation `!`), in-place and out=.
  std::vector<int> writtenArgs;
  // Set when the out= variant failed on CPU aliases (e.g. it resizes its
  // output internally, which a fixed-size alias cannot do); from then on the
  // op runs functionally and its results are copied.
  mutable std::atomic<bool> outVariantBroken{false};
  // Set when the op's meta kernel is known to disagree with its CPU kernel;
  // from then on the op runs synchronously. See Note [Meta kernels that
  // disagree with the CPU kernel].
  mutable std::atomic<bool> metaUntrusted{false};
  // Output metadata by argument signature. See Note [Output metadata cache].
  mutable std::shared_mutex cacheMutex;
  mutable std::unordered_map<std::string, std::shared_ptr<const MetaResult>> cache;
};

// Note [Output metadata cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A meta kernel's result depends only on the metadata of its tensor
// arguments (sizes, strides, dtype, conj/neg bits, whether it is a wrapped
// number), on the values of its other arguments, and on one piece of global
// state: the default dtype (torch.set_default_dtype), which integer inputs
// of ops like angle() and logit() promote to. Running it costs tens of microseconds (some are written in
// Python), more than the op itself on small tensors, so results are cached
// per op under a key that serialises exactly those inputs. Arguments that
// cannot be serialised make the call uncacheable (it still runs, uncached).
struct TensorMeta {
  bool defined = true;  // optional outputs may be undefined (e.g. masked grads)
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool conj = false;  // see Note [Views that change dtype or bits]
  bool neg = false;
};
struct MetaResult {
  // Per return: its tensors (one, or the elements of a list).
  std::vector<std::vector<TensorMeta>> returns;
};
constexpr size_t kMaxCachedSignaturesPerOp = 4096;

// Serialises an argument for the cache key; false if it cannot be.
bool appendKey(std::string& key, const IValue& v) {
  auto put = [&key](const auto& x) { key.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  auto putTensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      key.push_back('u');
      return;
    }
    key.push_back(isNpu(t) ? 'T' : 't');
    put(static_cast<int8_t>(t.scalar_type()));
    // A wrapped number (a Python scalar turned tensor) takes part in type
    // promotion differently from a 0-dim tensor of the same dtype.
    put(static_cast<int8_t>(t.is_conj() | (t.is_neg() << 1) |
                            (t.unsafeGetTensorImpl()->is_wrapped_number() << 2)));
    put(static_cast<int32_t>(t.dim()));
    for (int64_t d : t.sizes()) put(d);
    for (int64_t d : t.strides()) put(d);
  };
  if (v.isTensor()) {
    putTensor(v.toTensor());
  } else if (v.isNone()) {
    key.push_back('n');
  } else if (v.isInt()) {
    key.push_back('i');
    put(v.toInt());
  } else if (v.isDouble()) {
    key.push_back('d');
    put(v.toDouble());
  } else if (v.isBool()) {
    key.push_back('b');
    put(v.toBool());
  } else if (v.isSymInt()) {
    key.push_back('i');
    put(v.toSymInt().expect_int());
  } else if (v.isIntList()) {
    key.push_back('I');
    for (int64_t x : v.toIntList()) put(x);
    key.push_back(';');
  } else if (v.isDoubleList()) {
    key.push_back('D');
    for (double x : v.toDoubleList()) put(x);
    key.push_back(';');
  } else if (v.isBoolList()) {
    key.push_back('B');
    for (bool x : v.toBoolList()) put(x);
    key.push_back(';');
  } else if (v.isString()) {
    key.push_back('s');
    key.append(v.toStringRef());
    key.push_back('\0');
  } else if (v.isDevice()) {
    key.push_back('v');
    put(static_cast<int8_t>(v.toDevice().type()));
  } else if (v.isGenerator()) {
    key.push_back('g');
  } else if (v.isTensorList()) {
    key.push_back('L');
    for (const at::Tensor& t : v.toTensorVector()) putTensor(t);
    key.push_back(';');
  } else if (v.isList()) {
    key.push_back('l');
    for (const IValue& e : v.toListRef()) {
      if (!appendKey(key, e)) return false;
    }
    key.push_back(';');
  } else if (v.isComplexDouble()) {
    key.push_back('c');
    put(v.toComplexDouble());
  } else {
    return false;
  }
  return true;
}

TensorMeta tensorMeta(const at::Tensor& t) {
  if (!t.defined()) return TensorMeta{false, {}, {}, 0, c10::ScalarType::Undefined, false, false};
  return TensorMeta{
      true,        t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type(),
      t.is_conj(), t.is_neg()};
}

bool sameAliasSet(const c10::AliasInfo& a, const c10::AliasInfo& b) {
  for (const auto& s : a.beforeSets()) {
    if (b.beforeSets().count(s)) return true;
  }
  return false;
}

bool isTensorType(const c10::TypePtr& t) { return t->kind() == c10::TypeKind::TensorType; }

bool isTensorListType(const c10::TypePtr& t) {
  auto list = t->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

bool isOptionalTensorType(const c10::TypePtr& t) {
  auto opt = t->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == c10::TypeKind::TensorType;
}

// Finds "<name>.out"-style variants: same name, the functional arguments
// followed by one `Tensor(a!)` out argument per return, in order.
std::optional<c10::OperatorHandle> findOutVariant(const c10::FunctionSchema& schema) {
  if (schema.returns().empty()) return std::nullopt;
  const std::string& overload = schema.overload_name();
  std::vector<std::string> candidates;
  if (overload.empty()) {
    candidates = {"out"};
  } else {
    candidates = {overload + "_out", "out", overload.substr(0, overload.find('_')) + "_out"};
  }
  for (const auto& candidate : candidates) {
    auto handle = c10::Dispatcher::singleton().findSchema({schema.name(), candidate});
    if (!handle.has_value()) continue;
    const auto& out = handle->schema();
    const size_t n = schema.arguments().size();
    if (out.arguments().size() != n + schema.returns().size()) continue;
    bool match = true;
    for (size_t i = 0; i < n && match; ++i) {
      match = out.arguments()[i].name() == schema.arguments()[i].name() &&
              *out.arguments()[i].type() == *schema.arguments()[i].type();
    }
    for (size_t i = 0; i < schema.returns().size() && match; ++i) {
      const auto& a = out.arguments()[n + i];
      match = isTensorType(a.type()) && a.alias_info() && a.alias_info()->isWrite() &&
              isTensorType(schema.returns()[i].type());
    }
    if (match) return handle;
  }
  return std::nullopt;
}

// Note [out= ops run functionally]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The meta kernel of an out= op does not always predict the out tensor's
// final shape: some CPU out kernels use `out` as scratch space of another
// shape and resize it again at the end (mse_loss.out with a reduction), and a
// kernel can never resize a CPU alias of device memory. So an out= op takes
// its output metadata from the meta kernel of its functional counterpart and
// resizes `out` on the host up front, as the real kernel would. Its task then
// runs the out kernel straight into the device memory (no copy), and trusts
// the result only if the kernel neither threw nor reshaped an output alias;
// otherwise the op is marked (OpInfo::outVariantBroken) and computed by the
// functional kernel plus a copy, now and from then on. (A kernel that fails
// after writing into an out tensor that is also one of its inputs would leave
// that input changed; no ATen out kernel is known to do this.) PyTorch's
// functional wrappers route many functional calls through out= variants on
// new backends, so this path is hot.

// All overload names of each operator name, indexed once.
const std::vector<c10::OperatorName>& overloadsOf(const std::string& name) {
  static std::once_flag once;
  static std::unordered_map<std::string, std::vector<c10::OperatorName>>* index = nullptr;
  std::call_once(once, [] {
    auto built =
        std::make_unique<std::unordered_map<std::string, std::vector<c10::OperatorName>>>();
    for (const auto& n : c10::Dispatcher::singleton().getAllOpNames())
      (*built)[n.name].push_back(n);
    index = built.release();  // leaked: read during process exit
  });
  static const std::vector<c10::OperatorName> none;
  auto it = index->find(name);
  return it == index->end() ? none : it->second;
}

// Number of trailing keyword-only Tensor(a!) arguments that the op returns,
// in order (its out arguments); 0 if it is not an out= op.
size_t countOutArgs(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  const auto& rets = schema.returns();
  if (rets.empty() || rets.size() > args.size()) return 0;
  const size_t first = args.size() - rets.size();
  for (size_t i = 0; i < rets.size(); ++i) {
    const auto& a = args[first + i];
    const auto& r = rets[i];
    if (!a.kwarg_only() || !isTensorType(a.type()) || !a.alias_info() ||
        !a.alias_info()->isWrite() || !r.alias_info() ||
        !sameAliasSet(*r.alias_info(), *a.alias_info())) {
      return 0;
    }
  }
  return rets.size();
}

std::optional<c10::OperatorHandle> findFunctionalVariant(const c10::FunctionSchema& out,
                                                         size_t numOut) {
  const size_t n = out.arguments().size() - numOut;
  for (const auto& name : overloadsOf(out.name())) {
    if (name.overload_name == out.overload_name()) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle.has_value() || !handle->hasSchema()) continue;
    const auto& f = handle->schema();
    if (f.arguments().size() != n || f.returns().size() != numOut) continue;
    bool match = true;
    for (size_t i = 0; i < n && match; ++i) {
      match = f.arguments()[i].name() == out.arguments()[i].name() &&
              *f.arguments()[i].type() == *out.arguments()[i].type() &&
              !(f.arguments()[i].alias_info() && f.arguments()[i].alias_info()->isWrite());
    }
    for (size_t i = 0; i < numOut && match; ++i) {
      match = isTensorType(f.returns()[i].type()) && f.returns()[i].alias_info() == nullptr;
    }
    if (match) return handle;
  }
  return std::nullopt;
}

// Note [Meta kernels that disagree with the CPU kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The asynchronous path allocates outputs from the meta kernel; its task can
// only check afterwards that the CPU kernel produced those shapes (Note
// [Outputs are checked against their metadata]). Where they disagree, that
// call fails with an error and the op is marked (OpInfo::metaUntrusted) to
// take the synchronous path from then on, where outputs take the CPU
// kernel's shapes. Ops known to disagree start marked, so that their first
// call does not fail: _embedding_bag and _embedding_bag_forward_only size
// their offset2bag, bag_size and max_indices outputs by the implementation
// the CPU kernel picks (a fast path that leaves offset2bag empty, chosen
// from dtypes, strides, mode and the build), which their meta kernel does
// not reproduce. Before these checks, the uninitialised outputs of the meta
// shapes reached embedding_bag's backward as indices and crashed it.
bool metaKnownToDisagree(const c10::OperatorName& name) {
  return name.name == "aten::_embedding_bag" || name.name == "aten::_embedding_bag_forward_only";
}

std::unique_ptr<OpInfo> computeOpInfo(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  auto owned = std::make_unique<OpInfo>();
  OpInfo& info = *owned;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    auto opt = args[i].type()->cast<c10::OptionalType>();
    auto t = opt ? opt->getElementType() : args[i].type();
    if (t->kind() == c10::TypeKind::GeneratorType) info.generatorArg = static_cast<int>(i);
    if (args[i].alias_info() && args[i].alias_info()->isWrite()) {
      info.writtenArgs.push_back(static_cast<int>(i));
    }
  }
  for (const auto& ret : schema.returns()) {
    ReturnInfo r;
    r.isList = isTensorListType(ret.type());
    if (!isTensorType(ret.type()) && !r.isList) {
      r.kind = ReturnKind::kNonTensor;
      info.anyNonTensor = true;
    } else if (ret.alias_info() != nullptr) {
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].alias_info() && sameAliasSet(*ret.alias_info(), *args[i].alias_info())) {
          r.arg = static_cast<int>(i);
          break;
        }
      }
      r.kind = ret.alias_info()->isWrite() ? ReturnKind::kMutatedArg : ReturnKind::kViewOfArg;
      if (r.arg < 0) r.kind = ReturnKind::kNonTensor;  // cannot map it: be safe
    }
    if (r.kind != ReturnKind::kNew) info.allNew = false;
    info.returns.push_back(r);
  }
  if (info.allNew) info.outVariant = findOutVariant(schema);
  info.numOutArgs = countOutArgs(schema);
  if (info.numOutArgs > 0) info.functionalVariant = findFunctionalVariant(schema, info.numOutArgs);
  if (metaKnownToDisagree(schema.operator_name())) info.metaUntrusted = true;
  return owned;
}

// Cache of OpInfo by operator. Reads are shared; an op is computed once.
const OpInfo& opInfo(const c10::OperatorHandle& op) {
  static std::shared_mutex mutex;
  static std::unordered_map<c10::OperatorName, std::unique_ptr<OpInfo>> cache;
  const auto& name = op.operator_name();
  {
    std::shared_lock<std::shared_mutex> lock(mutex);
    auto it = cache.find(name);
    if (it != cache.end()) return *it->second;
  }
  auto computed = computeOpInfo(op);
  std::unique_lock<std::shared_mutex> lock(mutex);
  auto [it, inserted] = cache.emplace(name, std::move(computed));
  return *it->second;
}

// Ops that accept CPU index tensors beside npu tensors, as CUDA does.
bool acceptsCpuTensors(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put_" ||
         name.name == "aten::_index_put_impl_" || name.name == "aten::index_put";
}

struct DeviceFinder {
  const c10::OperatorHandle& op;
  c10::DeviceIndex device = -1;
  bool sawCpuTensor = false;

  void tensor(const at::Tensor& t) {
    if (!t.defined()) return;
    if (isNpu(t)) {
      const c10::DeviceIndex d = t.device().index();
      TORCH_CHECK(device == -1 || device == d,
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, npu:",
                  static_cast<int>(device), " and npu:", static_cast<int>(d),
                  "! (when checking arguments of ", op.schema().name(), ")", NPU_ERROR_SUFFIX);
      device = d;
    } else if (t.device().is_cpu() && t.dim() > 0) {
      sawCpuTensor = true;
    }
  }

  void value(const IValue& v) {
    if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) tensor(t);
    } else if (v.isList()) {
      for (const IValue& e : v.toListRef()) {
        if (e.isTensor()) tensor(e.toTensor());
      }
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1 &&
               device == -1) {
      device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
};

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

// What the op's task reads and writes (Note [Poisoned memory]): every npu
// argument is read except the out= arguments, which are only written; the
// arguments annotated as written and the fresh outputs are written.
TaskAccess opAccess(const Stack& args, const OpInfo& info, const std::vector<at::Tensor>& fresh) {
  TaskAccess access;
  const size_t firstOut = args.size() - info.numOutArgs;
  for (size_t i = 0; i < firstOut; ++i) {
    forEachNpuTensor(args[i], [&](const at::Tensor& t) { access.read(t); });
  }
  for (int i : info.writtenArgs) {
    forEachNpuTensor(args[i], [&](const at::Tensor& t) { access.write(t); });
  }
  for (const at::Tensor& f : fresh) access.write(f);
  return access;
}

// Note [Task captures and memory reuse]
// A task holds on to the memory it uses only where it must. A tensor whose
// block the caching allocator handed out on the task's own stream is
// captured as a CPU alias, which does not own the memory: if the program
// drops the tensor before the task ran, the block returns to the pool at
// once and the next allocation on that stream may take it. That is safe
// because whatever touches the block next is queued behind this task on the
// same stream; it is the rule of PyTorch's CUDA allocator, and it keeps a
// host that runs far ahead of the device from holding one block per queued
// op (and the device from walking through cold memory). Every other tensor
// (memory of another stream, which could be handed to work that does not
// wait for this task, or memory the allocator does not manage) is captured
// by reference and kept alive until the task ran. So a missing
// record_stream for such a tensor is harmless here, where on hardware it is
// a race. The alias is also a snapshot: a later resize_ or set_ of the
// tensor on the host does not change what the queued task sees.
at::Tensor captureForTask(const at::Tensor& npu, const NPUStream& stream) {
  if (npu.has_storage() && NPUCachingAllocator::isAllocatedOn(npu.storage().data_ptr(), stream)) {
    return cpuAlias(npu);
  }
  if (npu.has_storage() && npu.storage().data_ptr().get() != nullptr) detail::noteHeldByTask(stream);
  return npu;
}

// The kernel's view of a tensor a task captured (see captureForTask): an
// alias is one already; a tensor held by reference gets its alias now.
at::Tensor kernelView(const at::Tensor& captured) {
  return isNpu(captured) ? cpuAlias(captured) : captured;
}

// Note [Outputs are checked against their metadata]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An op's outputs were allocated from its meta kernel's metadata; its CPU
// kernel may disagree (a meta kernel that is wrong for some arguments, an
// out kernel that resizes or re-points its output). Whatever the kernel
// does must stay inside the output's memory and land in the output's shape:
//  - an out kernel gets a TensorImpl of its own for each output (outAlias),
//    so resizing or set_-ing it cannot change the alias the task keeps for
//    the fallback copy; it cannot grow past the output either (Note [A CPU
//    alias stays inside its storage]); after it returned, each output must
//    still have the metadata and memory it was given (sameAlias), else the
//    op is computed functionally (Note [out= ops run functionally]);
//  - a functional result is copied into an output only if it has exactly
//    the output's shape and dtype (copyResult): copy_ would broadcast a
//    smaller result or convert another dtype silently.
// A mismatch is an error of the op (reported at the next synchronize), never
// a wrong answer or a write into someone else's memory.
at::Tensor outAlias(const at::Tensor& captured) {
  if (isNpu(captured)) return cpuAlias(captured);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(captured.storage()),
                                                              captured.key_set(), captured.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(captured.sizes(), captured.strides(),
                                                     captured.storage_offset());
  return alias;
}

bool sameAlias(const at::Tensor& out, const at::Tensor& expected) {
  return out.sizes() == expected.sizes() && out.strides() == expected.strides() &&
         out.storage_offset() == expected.storage_offset() &&
         out.storage().data() == expected.storage().data() &&
         out.scalar_type() == expected.scalar_type();
}

void copyResult(const OpInfo& info, const char* opName, const at::Tensor& out,
                const at::Tensor& result) {
  if (result.sizes() != out.sizes() || result.scalar_type() != out.scalar_type()) {
    // See Note [Meta kernels that disagree with the CPU kernel].
    info.metaUntrusted.store(true, std::memory_order_relaxed);
    TORCH_CHECK(false, opName, ": the CPU kernel returned a result of shape ", result.sizes(),
                " and dtype ", result.scalar_type(), ", but the output was allocated with shape ",
                out.sizes(), " and dtype ", out.scalar_type(),
                " (from the meta kernel); later calls of this op run synchronously",
                NPU_ERROR_SUFFIX);
  }
  out.copy_(result);
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

// Note [Views that change dtype or bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A view return is built from its meta twin: sizes, strides and offset as
// the meta kernel computed them over a meta base at offset 0, and the meta
// result's dtype and conj/neg bits. The dtype need not be the base's:
// view_as_real makes float views of complex memory, view_as_complex the
// reverse, view(dtype) either. Sizes, strides and offsets count elements of
// the view's dtype, so the view must be made with that dtype (an as_strided
// of the base would read [n, 2] float strides as complex, twice past the
// storage), and the base's own offset must be converted to view elements
// through bytes; a base offset that is not a whole number of view elements
// cannot be viewed (PyTorch raises the same for view_as_complex).
at::Tensor viewOf(const at::Tensor& base, const TensorMeta& m) {
  at::Tensor view;
  if (m.dtype == base.scalar_type()) {
    view = base.as_strided(m.sizes, m.strides, base.storage_offset() + m.offset);
  } else {
    const caffe2::TypeMeta dtype = c10::scalarTypeToTypeMeta(m.dtype);
    const int64_t baseBytes = base.storage_offset() * static_cast<int64_t>(base.itemsize());
    const auto itemsize = static_cast<int64_t>(dtype.itemsize());
    TORCH_CHECK(baseBytes % itemsize == 0, "cannot view a tensor of dtype ", base.scalar_type(),
                " at storage offset ", base.storage_offset(), " as ", m.dtype,
                ": the offset is not a multiple of ", itemsize, " bytes", NPU_ERROR_SUFFIX);
    const int64_t offset = baseBytes / itemsize + m.offset;
    at::native::checkInBoundsForStorage(c10::IntArrayRef(m.sizes), c10::IntArrayRef(m.strides),
                                        offset, dtype, base.storage());
    // The key set is the base's minus its bits, which are set from the meta
    // result below (view_as_real of a conj tensor is an error, not a view).
    c10::DispatchKeySet keys =
        base.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
    view = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW,
                                                    c10::Storage(base.storage()), keys, dtype);
    view.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, offset);
  }
  if (view.is_conj() != m.conj) view._set_conj(m.conj);
  if (view.is_neg() != m.neg) view._set_neg(m.neg);
  return view;
}

at::Generator cpuGenerator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// Reserves the op's random numbers now (at enqueue or before a synchronous
// run); nullopt for ops without a Generator argument. See Note [Random
// numbers are reserved at enqueue].
std::optional<uint64_t> reserveOpSeed(const Stack& args, const OpInfo& info,
                                      c10::DeviceIndex device) {
  if (info.generatorArg < 0) return std::nullopt;
  const IValue& g = args[info.generatorArg];
  return reserveSeed(g.isGenerator() ? std::optional<at::Generator>(g.toGenerator()) : std::nullopt,
                     device);
}

// The first n arguments as the CPU kernel takes them: npu tensors as CPU
// aliases, the generator as a CPU generator seeded from the reserved seed.
// Only inside tasks (aliases read device memory).
// `alias` makes the CPU view of each npu tensor (cpuAlias, or a wrapper that
// also remembers which alias is which argument).
template <typename AliasFn>
Stack cpuArgs(const Stack& args, size_t n, int generatorArg, const std::optional<uint64_t>& seed,
              const AliasFn& alias) {
  Stack s;
  s.reserve(args.size());
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == generatorArg) {
      s.emplace_back(cpuGenerator(*seed));
    } else {
      s.push_back(mapTensors(args[i], alias, c10::DeviceType::CPU));
    }
  }
  return s;
}

Stack cpuArgs(const Stack& args, size_t n, int generatorArg, const std::optional<uint64_t>& seed) {
  return cpuArgs(args, n, generatorArg, seed, cpuAlias);
}

// Replaces the op's nargs arguments on the stack by its results.
void replaceArgsWithResults(Stack* stack, size_t nargs, Stack& results) {
  stack->erase(stack->end() - nargs, stack->end());
  for (auto& v : results) stack->push_back(std::move(v));
}

// Note [The synchronous op path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Ops whose outputs the host cannot know in advance still run through the
// stream, so that they obey the memory-reuse rule of every other op (Note
// [Task captures and memory reuse]): their CPU kernel runs as a task on the
// current stream, reading and writing device memory in stream order; the host
// waits for the stream; and each fresh result is written to new device memory
// by a copy task queued behind it. Writing results from the host instead
// would race with work other threads queued on the stream meanwhile, which may
// still read a block that was freed and now backs the result.
struct SyncOutcome {
  Stack results;  // the kernel's results: CPU tensors and scalars
  // Results that are CPU aliases of npu arguments: alias -> the npu tensor.
  std::unordered_map<const c10::TensorImpl*, const c10::TensorImpl*> npuOfAlias;
};

// Writes a host result into fresh device memory on `stream`, in stream order.
at::Tensor resultToNpu(const at::Tensor& r, const NPUStream& stream, c10::DeviceIndex device) {
  at::Tensor contiguous = r.is_non_overlapping_and_dense() ? r : r.contiguous();
  at::Tensor out =
      emptyNpu(contiguous.sizes(), contiguous.strides(), contiguous.scalar_type(), device);
  TaskAccess access;
  access.write(out);
  // `out` is fresh memory of `stream`: a non-owning alias is safe here.
  launchKernel(stream, "aten::copy_", std::move(access),
               [dst = cpuAlias(out), src = std::move(contiguous)]() mutable { dst.copy_(src); });
  return out;
}

// Note [Out arguments the CPU kernel resized]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An out= kernel resizes its out arguments to the result's shape, which on
// the synchronous path is only known once the kernel ran. It cannot do that
// to a CPU alias of device memory (Note [A CPU alias stays inside its
// storage]), and an empty out has no memory, so its alias is an ordinary CPU
// tensor that the kernel would fill and nobody read: linalg.lstsq (whose
// functional form is CompositeExplicitAutograd over lstsq.out, which has no
// meta kernel) returned its empty out tensors. So an out= op with a
// functional counterpart runs that on the synchronous path, and its results
// are moved into the out arguments on the host, resized as PyTorch's
// resize_output does (Note [out= ops run functionally]). Any other op whose
// kernel left an argument's alias with another shape or memory (an in-place
// op that shrank it) gives the npu tensor the alias's shape and contents
// (adoptResized); the stream was synchronized, so the alias can be read.
void adoptResized(const at::Tensor& npu, const at::Tensor& alias) {
  const at::Tensor host = alias.clone(at::MemoryFormat::Contiguous);
  npu.resize_(host.sizes());
  npu.copy_(host);
}

void runSynchronously(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex device,
                      const OpInfo& info) {
  const auto& schema = op.schema();
  noteHostSync(schema.name().c_str());  // before anything is queued: Note [Host syncs of the op path]
  const NPUStream stream = getCurrentNPUStream(device);
  const size_t nargs = schema.arguments().size();
  Stack args(stack->end() - nargs, stack->end());
  const std::optional<uint64_t> seed = reserveOpSeed(args, info, device);
  TaskAccess access = opAccess(args, info, {});
  access.writesHost = true;  // the results come back to the host
  auto outcome = std::make_shared<SyncOutcome>();
  const int generatorArg = info.generatorArg;
  // See Note [Out arguments the CPU kernel resized].
  const bool viaFunctional = info.functionalVariant.has_value();
  const size_t computeArgs = viaFunctional ? nargs - info.numOutArgs : nargs;
  const c10::OperatorHandle computeOp = viaFunctional ? *info.functionalVariant : op;
  launchKernel(stream, schema.name().c_str(), std::move(access),
               [computeOp, computeArgs, args, generatorArg, seed, outcome] {
                 Stack s = cpuArgs(args, computeArgs, generatorArg, seed,
                                   [&](const at::Tensor& t) {
                                     at::Tensor alias = cpuAlias(t);
                                     outcome->npuOfAlias.emplace(alias.unsafeGetTensorImpl(),
                                                                 t.unsafeGetTensorImpl());
                                     return alias;
                                   });
                 computeOp.redispatchBoxed(kCpuKeys, &s);
                 outcome->results = std::move(s);
               });
  waitForHostRead(stream);  // raises the kernel's failure, if any
  if (viaFunctional) {
    Stack results;
    for (size_t r = 0; r < info.numOutArgs; ++r) {
      const at::Tensor& out = args[computeArgs + r].toTensor();
      const at::Tensor& result = outcome->results.at(r).toTensor();
      at::native::resize_output(out, result.sizes());
      out.copy_(result);
      results.emplace_back(out);
    }
    replaceArgsWithResults(stack, nargs, results);
    return;
  }
  // The npu argument a kernel returned, or a fresh npu copy of a result.
  std::unordered_map<const c10::TensorImpl*, at::Tensor> npuArgs;
  for (const IValue& a : args) {
    forEachNpuTensor(a, [&](const at::Tensor& t) { npuArgs.emplace(t.unsafeGetTensorImpl(), t); });
  }
  auto toNpu = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined()) return r;
    auto alias = outcome->npuOfAlias.find(r.unsafeGetTensorImpl());
    if (alias != outcome->npuOfAlias.end()) {
      const at::Tensor& npu = npuArgs.at(alias->second);
      if (!sameAlias(r, npu)) adoptResized(npu, r);
      return npu;
    }
    if (!r.device().is_cpu()) return r;
    return resultToNpu(r, stream, device);
  };
  Stack results = std::move(outcome->results);
  for (IValue& v : results) {
    if (v.isTensor()) {
      v = toNpu(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) out.push_back(toNpu(t));
      v = IValue(out);
    }
  }
  replaceArgsWithResults(stack, nargs, results);
}

// The asynchronous path. Returns false (stack untouched) if the op must run
// synchronously.
bool tryRunAsync(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex device,
                 const OpInfo& info) {
  if (info.anyNonTensor || info.metaUntrusted.load(std::memory_order_relaxed)) return false;
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  Stack args(stack->end() - nargs, stack->end());

  // 2. Output metadata: from the cache, else from the meta kernel.
  //    See Note [Output metadata cache].
  thread_local std::string key;
  key.clear();
  // Global state that meta kernels read: the default dtype decides the
  // result dtype of ops such as angle() or logit() on integer tensors.
  key.push_back(static_cast<char>(c10::get_default_dtype_as_scalartype()));
  bool cacheable = true;
  for (size_t i = 0; i < nargs && cacheable; ++i) cacheable = appendKey(key, args[i]);
  std::shared_ptr<const MetaResult> metaResult;
  if (cacheable) {
    std::shared_lock<std::shared_mutex> lock(info.cacheMutex);
    auto it = info.cache.find(key);
    if (it != info.cache.end()) metaResult = it->second;
  }
  // See Note [out= ops run functionally].
  const bool viaFunctional = info.functionalVariant.has_value();
  const size_t computeArgs = viaFunctional ? nargs - info.numOutArgs : nargs;
  const c10::OperatorHandle& computeOp = viaFunctional ? *info.functionalVariant : op;
  if (!metaResult) {
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
      computeOp.redispatchBoxed(kMetaKeys, &meta);
    } catch (const std::exception&) {
      // No meta kernel, a data-dependent shape, or a user error that the CPU
      // kernel will report the same way. (Meta kernels written in Python
      // throw torch's python_error, not c10::Error.)
      return false;
    }
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
    metaResult = computed;
    if (cacheable) {
      std::unique_lock<std::shared_mutex> lock(info.cacheMutex);
      if (info.cache.size() >= kMaxCachedSignaturesPerOp) info.cache.clear();
      info.cache.emplace(key, metaResult);
    }
  }
  const size_t nrets = schema.returns().size();

  // 3. Outputs.
  std::vector<at::Tensor> fresh;  // kNew outputs, in return order (lists flattened)
  Stack results;
  results.reserve(nrets);
  for (size_t r = 0; r < nrets; ++r) {
    const ReturnInfo& ri = info.returns[r];
    const std::vector<TensorMeta>& metas = metaResult->returns[r];
    switch (ri.kind) {
      case ReturnKind::kMutatedArg: {
        const IValue& a = args[ri.arg];
        if (a.isTensor() && metas.size() == 1 &&
            a.toTensor().sizes() != c10::IntArrayRef(metas[0].sizes)) {
          // out= with a wrong size: resize (and warn if it had elements)
          // exactly as PyTorch's kernels do.
          at::native::resize_output(a.toTensor(), metas[0].sizes);
        }
        results.push_back(a);
        break;
      }
      case ReturnKind::kViewOfArg: {
        const at::Tensor& base = args[ri.arg].toTensor();
        auto view = [&](const TensorMeta& m) { return viewOf(base, m); };
        if (ri.isList) {
          c10::List<at::Tensor> out;
          for (const TensorMeta& m : metas) out.push_back(view(m));
          results.emplace_back(out);
        } else {
          results.emplace_back(view(metas.at(0)));
        }
        break;
      }
      case ReturnKind::kNew: {
        auto makeNew = [&](const TensorMeta& m) {
          if (!m.defined) {
            fresh.emplace_back();  // keeps positions; the task skips it
            return at::Tensor();
          }
          at::Tensor t = emptyNpu(m.sizes, m.strides, m.dtype, device);
          fresh.push_back(t);
          return t;
        };
        if (ri.isList) {
          c10::List<at::Tensor> out;
          for (const TensorMeta& m : metas) out.push_back(makeNew(m));
          results.emplace_back(out);
        } else {
          results.emplace_back(makeNew(metas.at(0)));
        }
        break;
      }
      case ReturnKind::kNonTensor:
        TORCH_INTERNAL_ASSERT(false, "non-tensor return on the async path");
    }
  }

  // Pure views need no work on the device.
  bool onlyViews = true;
  for (const auto& ri : info.returns) onlyViews &= ri.kind == ReturnKind::kViewOfArg;
  if (onlyViews && !info.returns.empty()) {
    replaceArgsWithResults(stack, nargs, results);
    return true;
  }

  // 4. The task. Random ops reserve their numbers now, at enqueue.
  const std::optional<uint64_t> seed = reserveOpSeed(args, info, device);
  const NPUStream stream = getCurrentNPUStream(device);
  TaskAccess access = opAccess(args, info, fresh);
  // See Note [Task captures and memory reuse].
  auto capture = [&stream](const at::Tensor& t) { return captureForTask(t, stream); };
  for (IValue& a : args) a = mapTensors(a, capture, std::nullopt);
  // Fresh outputs were just allocated on `stream` (emptyNpu): no need to ask
  // the allocator.
  for (at::Tensor& f : fresh) {
    if (f.defined()) f = cpuAlias(f);
  }
  const int generatorArg = info.generatorArg;
  const OpInfo* infoPtr = &info;  // stable: the cache never frees entries
  if (viaFunctional) {
    launchKernel(
        stream, schema.name().c_str(), std::move(access),
        [op, computeOp, args = std::move(args), computeArgs, generatorArg, seed, infoPtr]() {
          Stack s = cpuArgs(args, computeArgs, generatorArg, seed);
          // Fast path: the out kernel writes straight into the device
          // memory. It is trusted only if it neither throws nor reshapes its
          // outputs (see Note [out= ops run functionally]); otherwise the op
          // is computed functionally, and marked to be from now on if the
          // functional kernel succeeds where the out kernel failed (an error
          // both raise is the caller's, e.g. an index out of range, and says
          // nothing about the out kernel).
          bool outFailed = false;
          if (!infoPtr->outVariantBroken.load(std::memory_order_relaxed)) {
            Stack withOut = s;
            std::vector<at::Tensor> outs;
            for (size_t i = computeArgs; i < args.size(); ++i) {
              outs.push_back(outAlias(args[i].toTensor()));
              withOut.emplace_back(outs.back());
            }
            bool ok = false;
            try {
              op.redispatchBoxed(kCpuKeys, &withOut);
              ok = true;
              // See Note [Outputs are checked against their metadata].
              for (size_t i = 0; i < outs.size() && ok; ++i) {
                ok = sameAlias(outs[i], args[computeArgs + i].toTensor());
              }
            } catch (const std::exception&) {
              ok = false;
            }
            if (ok) return;
            outFailed = true;
          }
          computeOp.redispatchBoxed(kCpuKeys, &s);
          if (outFailed) infoPtr->outVariantBroken.store(true, std::memory_order_relaxed);
          for (size_t r = 0; r < s.size(); ++r) {
            copyResult(*infoPtr, op.schema().name().c_str(),
                       kernelView(args[computeArgs + r].toTensor()), s[r].toTensor());
          }
        });
    replaceArgsWithResults(stack, nargs, results);
    return true;
  }
  bool allDefined = true;
  for (const at::Tensor& f : fresh) allDefined &= f.defined();
  std::optional<c10::OperatorHandle> outOp;
  if (allDefined && !info.outVariantBroken.load(std::memory_order_relaxed)) {
    outOp = info.outVariant;
  }
  launchKernel(stream, schema.name().c_str(), std::move(access),
               [op, args = std::move(args), fresh, outOp, generatorArg, seed, infoPtr]() {
                 Stack s = cpuArgs(args, args.size(), generatorArg, seed);
                 bool outFailed = false;
                 if (outOp.has_value()) {
                   Stack withOut = s;
                   std::vector<at::Tensor> outs;
                   outs.reserve(fresh.size());
                   for (const at::Tensor& f : fresh) {
                     outs.push_back(outAlias(f));
                     withOut.emplace_back(outs.back());
                   }
                   try {
                     outOp->redispatchBoxed(kCpuKeys, &withOut);
                     // See Note [Outputs are checked against their metadata].
                     bool ok = true;
                     for (size_t i = 0; i < outs.size() && ok; ++i) {
                       ok = sameAlias(outs[i], fresh[i]);
                     }
                     if (ok) return;
                   } catch (const std::exception&) {
                   }
                   // Fall through to the functional op; see outVariantBroken.
                   outFailed = true;
                 }
                 op.redispatchBoxed(kCpuKeys, &s);
                 if (outFailed) infoPtr->outVariantBroken.store(true, std::memory_order_relaxed);
                 const std::vector<ReturnInfo>& returns = infoPtr->returns;
                 const char* name = op.schema().name().c_str();
                 size_t next = 0;
                 // A list result may have another length than its meta twin.
                 auto nextOutput = [&]() -> const at::Tensor& {
                   TORCH_CHECK(next < fresh.size(), name, ": the CPU kernel returned more ",
                               "tensors than the meta kernel", NPU_ERROR_SUFFIX);
                   return fresh[next++];
                 };
                 for (size_t r = 0; r < returns.size(); ++r) {
                   if (returns[r].kind != ReturnKind::kNew) continue;
                   if (returns[r].isList) {
                     for (const at::Tensor& t : s[r].toTensorVector()) {
                       const at::Tensor& f = nextOutput();
                       if (f.defined()) copyResult(*infoPtr, name, kernelView(f), t);
                     }
                   } else {
                     const at::Tensor& f = nextOutput();
                     if (f.defined()) copyResult(*infoPtr, name, kernelView(f), s[r].toTensor());
                   }
                 }
                 TORCH_CHECK(next == fresh.size(), name, ": the CPU kernel returned fewer ",
                             "tensors than the meta kernel", NPU_ERROR_SUFFIX);
               });
  replaceArgsWithResults(stack, nargs, results);
  return true;
}

void npuFallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  DeviceFinder finder{op};
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) finder.value((*stack)[i]);
  TORCH_CHECK(finder.device >= 0, "npu fallback for ", schema.name(),
              " found no npu tensor or device among the arguments", NPU_ERROR_SUFFIX);
  TORCH_CHECK(!finder.sawCpuTensor || acceptsCpuTensors(schema.operator_name()),
              "Expected all tensors to be on the same device, but found at least two devices, "
              "npu:",
              static_cast<int>(finder.device), " and cpu! (when checking arguments of ",
              schema.name(), ")", NPU_ERROR_SUFFIX);
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, finder.device));
  const OpInfo& info = opInfo(op);
  if (finder.sawCpuTensor || !tryRunAsync(op, stack, finder.device, info)) {
    runSynchronously(op, stack, finder.device, info);
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
}

}  // namespace c10_npu::aten
