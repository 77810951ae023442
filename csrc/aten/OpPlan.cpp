// The op plan from the schema; see OpPlan.h.
#include "aten/OpPlan.h"

#include "aten/MetaFunctions.h"

#include <mutex>

namespace c10_npu::aten::detail {
namespace {

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

}  // namespace

bool hasOutVariantFamily(const c10::FunctionSchema& schema) {
  std::string name = schema.name();
  if (!name.empty() && name.back() == '_') {  // in place: ask its functional twin
    name.pop_back();
    const auto functional = c10::Dispatcher::singleton().findSchema({name, schema.overload_name()});
    return functional.has_value() && findOutVariant(functional->schema()).has_value();
  }
  for (const c10::Argument& a : schema.arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite()) return false;
  }
  return findOutVariant(schema).has_value();
}

namespace {

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

// Note [Ops without a CPU kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The op path runs every op through its CPU kernel, so an op that has none
// (backend-specific ops: cudnn_convolution, _cudnn_rnn, flash attention)
// cannot run on npu, unless this folder gives it a kernel of its own (Note
// [Kernels composed of CPU ops]). The dispatcher's table says so before
// anything is queued (a kernel of its own, or one of an alias key such as
// CompositeExplicitAutograd, for CPU), so the call raises NotImplementedError
// at once, instead of queueing a task that fails at the next synchronize.
bool hasCpuKernel(const c10::OperatorHandle& op) {
  return op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU);
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
  if (info.outVariant.has_value() &&
      !info.outVariant->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    // An out= variant without a CPU kernel of its own is PyTorch's generated
    // one (relu.out: the functional kernel into a temporary, then a copy).
    // The functional kernel computes in place of the output instead: Note
    // [Results computed in place of the output] in ResultPlacement.h.
    info.outVariant.reset();
  }
  info.numOutArgs = countOutArgs(schema);
  if (info.numOutArgs > 0) info.functionalVariant = findFunctionalVariant(schema, info.numOutArgs);
  info.noCpuKernel = !hasCpuKernel(op) &&
                     !(info.functionalVariant && hasCpuKernel(*info.functionalVariant)) &&
                     !(info.outVariant && hasCpuKernel(*info.outVariant));
  if (metaKnownToDisagree(schema.operator_name())) info.metaUntrusted = true;
  info.metaKernel = cppMetaKernel(info.functionalVariant ? *info.functionalVariant : op);
  return owned;
}

}  // namespace

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

}  // namespace c10_npu::aten::detail
