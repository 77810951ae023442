// Finding an op's C++ meta kernel; see Note [C++ meta kernels] in
// MetaFunctions.h.
#include "aten/MetaFunctions.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aten/MetaFunctionEntry.h"

namespace c10_npu::aten::detail {
namespace {

using Index = std::unordered_map<std::string_view, std::vector<const MetaFunctionEntry*>>;

// The table by at::meta:: name, built at the first call; leaked, as it is
// read until process exit. Thread-safe (a function-local static).
const Index& index() {
  static const Index* built = [] {
    auto* idx = new Index();
    for (size_t i = 0; i < kNumHandwrittenMetaFunctions; ++i) {
      (*idx)[kHandwrittenMetaFunctions[i].name].push_back(&kHandwrittenMetaFunctions[i]);
    }
    for (size_t i = 0; i < kNumMetaFunctions; ++i) {
      // Null: declared by torch's headers but not defined in this libtorch
      // (the table links them weakly).
      if (kMetaFunctions[i].fn == nullptr) continue;
      (*idx)[kMetaFunctions[i].name].push_back(&kMetaFunctions[i]);
    }
    return idx;
  }();
  return *built;
}


bool isHandwritten(const MetaFunctionEntry* entry) {
  return entry >= kHandwrittenMetaFunctions &&
         entry < kHandwrittenMetaFunctions + kNumHandwrittenMetaFunctions;
}

// Whether a C++ parameter or return type (`inferred`) is the schema's
// (`specified`). The C++ functions in the table take int where the schema
// says SymInt (their *_symint twins are not in the table), which boxed
// arguments of concrete sizes satisfy. Real types, not the schema's "fake"
// ones, are compared: those map ScalarType, Layout and MemoryFormat to int,
// which would let at::meta::f(Tensor, ScalarType) pass for f(Tensor, int).
bool sameType(const c10::TypePtr& inferred, const c10::TypePtr& specified) {
  if (*inferred == *specified) return true;
  std::string symbolic = specified->str();
  for (size_t at = symbolic.find("SymInt"); at != std::string::npos;
       at = symbolic.find("SymInt", at)) {
    symbolic.replace(at, 6, "int");
  }
  return symbolic == inferred->str();
}

bool matches(const c10::FunctionSchema& inferred, const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  const auto& rets = schema.returns();
  if (inferred.arguments().size() != args.size() || inferred.returns().size() != rets.size()) {
    return false;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!sameType(inferred.arguments()[i].real_type(), args[i].real_type())) return false;
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    if (!sameType(inferred.returns()[i].real_type(), rets[i].real_type())) return false;
  }
  return true;
}

}  // namespace

std::optional<c10::KernelFunction> cppMetaKernel(const c10::OperatorHandle& op) {
  if (!cppMetaKernelsEnabled() || !op.hasSchema()) return std::nullopt;
  const c10::FunctionSchema& schema = op.schema();
  constexpr std::string_view kAten = "aten::";
  std::string_view name = schema.name();
  if (name.substr(0, kAten.size()) != kAten) return std::nullopt;
  name.remove_prefix(kAten.size());
  auto it = index().find(name);
  if (it == index().end()) return std::nullopt;
  const MetaFunctionEntry* match = nullptr;
  for (const MetaFunctionEntry* candidate : it->second) {
    if (!matches(candidate->schema(), schema)) continue;
    // Ours come first in the index and win: Note [Argument checks the meta
    // kernels leave to the kernel] in HandwrittenMeta.cpp.
    if (isHandwritten(candidate)) return candidate->kernel(candidate->fn);
    if (match != nullptr) return std::nullopt;  // ambiguous: leave it to the dispatcher
    match = candidate;
  }
  if (match == nullptr) return std::nullopt;
  return match->kernel(match->fn);
}

// NPU_CPP_META: unset or 1 (use them), 0 (do not). A bad value raises, and
// again at every call (a throwing initialiser leaves the static unset).
bool cppMetaKernelsEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("NPU_CPP_META");
    const std::string_view value = env == nullptr ? "1" : env;
    TORCH_CHECK(value == "0" || value == "1", "NPU_CPP_META should be 0 or 1, but got '", value,
                "'");
    return value == "1";
  }();
  return on;
}

}  // namespace c10_npu::aten::detail
