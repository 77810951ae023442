// The op plan: what the generic op path (AsyncFallback.cpp) needs to know
// about an operator, derived once from its schema — what each return is
// (fresh, an argument written in place, a view of an argument), its
// Generator argument, and its out= and functional variants. Internal to
// csrc/aten.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace c10_npu::aten::detail {

// What a return of the op is, from its schema's alias annotations.
enum class ReturnKind : uint8_t { kNew, kMutatedArg, kViewOfArg, kNonTensor };

struct ReturnInfo {
  ReturnKind kind = ReturnKind::kNew;
  int arg = -1;         // argument index for kMutatedArg / kViewOfArg
  bool isList = false;  // Tensor[] return
};

struct MetaResult;  // OutputMetadata.h

// Note [out= ops run functionally]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The meta kernel of an out= op does not always predict the out tensor's
// final shape: some CPU out kernels use `out` as scratch space of another
// shape and resize it again at the end (mse_loss.out with a reduction), and a
// kernel can never resize a CPU alias of device memory. So an out= op takes
// its output metadata from the meta kernel of its functional counterpart and
// resizes `out` on the host up front, as the real kernel would. Its task then
// runs the out kernel straight into the device memory (no copy), and trusts
// the result only if the kernel neither threw nor reshaped an output alias
// (its warnings are held back until then: Note [Warnings of abandoned out=
// attempts], OpTask.cpp); otherwise the op is marked
// (OpInfo::outVariantBroken) and computed by the functional kernel plus a
// copy, now and from then on. (A kernel that fails
// after writing into an out tensor that is also one of its inputs would leave
// that input changed; no ATen out kernel is known to do this.) PyTorch's
// functional wrappers route many functional calls through out= variants on
// new backends, so this path is hot.

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
  // Neither the op nor a variant it runs as has a CPU kernel (a CUDA-only op
  // such as cudnn_convolution): Note [Ops without a CPU kernel] in OpPlan.cpp.
  bool noCpuKernel = false;
  // Set when the out= variant failed on CPU aliases (e.g. it resizes its
  // output internally, which a fixed-size alias cannot do); from then on the
  // op runs functionally and its results are copied.
  mutable std::atomic<bool> outVariantBroken{false};
  // Set when the op's meta kernel is known to disagree with its CPU kernel;
  // from then on the op runs synchronously. See Note [Meta kernels that
  // disagree with the CPU kernel] in OpPlan.cpp.
  mutable std::atomic<bool> metaUntrusted{false};
  // The C++ meta kernel that computes the op's output metadata (of its
  // functional variant for an out= op), if PyTorch has one; otherwise the
  // dispatcher's Meta kernel does. See Note [C++ meta kernels] in
  // MetaFunctions.h.
  std::optional<c10::KernelFunction> metaKernel;
  // Output metadata by argument signature. See Note [Output metadata cache]
  // in OutputMetadata.h.
  mutable std::shared_mutex cacheMutex;
  mutable std::unordered_map<std::string, std::shared_ptr<const MetaResult>> cache;
};

// The plan of `op`, computed at its first call and kept for the life of the
// process (the reference stays valid; tasks hold a pointer to it).
// Thread-safe: reads are shared, an op is computed once.
const OpInfo& opInfo(const c10::OperatorHandle& op);

// Whether `schema` is the functional or in-place variant of an op whose
// out= variant computes it (add.Tensor and add_.Tensor of add.out): such an
// op changes data, not metadata, and its output metadata comes from its
// meta function. Thread-safe.
bool hasOutVariantFamily(const c10::FunctionSchema& schema);

}  // namespace c10_npu::aten::detail
