// The task of an op: captures, CPU arguments and the body; see OpTask.h.
#include "aten/OpTask.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <exception>
#include <vector>

#include "aten/ResultPlacement.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUGenerator.h"

namespace c10_npu::aten::detail {
namespace {

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
  copyUnlessPlaced(out, result);
}

// Note [Warnings of abandoned out= attempts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Trying an op's out= kernel before its functional one is our choice, not
// the program's: when the attempt is abandoned (it threw, or it reshaped an
// output), nothing it did may be visible, and that includes its warnings.
// mse_loss.out with a reduction resizes its 0-dim output to the input's
// shape before it fails, and printed PyTorch's "An output with one or more
// elements was resized" warning at the first mse_loss of every process,
// although the program never passed an out tensor. So the attempt runs with
// its warnings held back, and they are raised only if its result is kept.
// (A TORCH_WARN_ONCE of an abandoned attempt is spent without being shown;
// the functional kernel that runs instead does not raise it again.)
class HeldWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { held_.push_back(warning); }

  // Raises the held warnings through the handler that was current before.
  void release() {
    for (const c10::Warning& w : held_) c10::warn(w);
    held_.clear();
  }

 private:
  std::vector<c10::Warning> held_;
};

// Runs `attempt` (true: its result is kept) with its warnings held back; an
// exception counts as false and is stored in `error` when one is given. See
// Note [Warnings of abandoned out= attempts].
template <typename F>
bool attemptOutKernel(const F& attempt, std::exception_ptr* error = nullptr) {
  HeldWarnings held;
  bool kept = false;
  {
    const c10::WarningUtils::WarningHandlerGuard guard(&held);
    try {
      kept = attempt();
    } catch (const std::exception&) {
      kept = false;
      if (error != nullptr) *error = std::current_exception();
    }
  }
  if (kept) held.release();
  return kept;
}

// Runs `run` over the kernel's arguments: prepared once when the task was
// recorded into a graph, else made now (with what `deferred` took). A call
// whose wrapped numbers were promoted and that fails runs again with the
// numbers as captured, so that the error is the op's own (Note [Wrapped
// numbers of pointwise ops] in WrappedNumbers.h).
template <typename Run>
void runOverArgs(const ReplayArgs* replay, const DeferredArgs& deferred, c10::ArrayRef<IValue> args,
                 size_t n, int generatorArg, const std::optional<SeedReservation>& seed,
                 const Run& run) {
  auto eager = [&](bool promote) {
    Stack s = cpuArgs(args, n, generatorArg, seed);
    deferred.fill(s, promote);  // See Note [Aliases are made where the kernel runs].
    return s;
  };
  const bool promoted = replay != nullptr ? replay->promoted() : deferred.promotes();
  auto kernelArgs = [&] {
    return replay != nullptr ? replay->forRun(args, generatorArg, seed) : eager(true);
  };
  if (!promoted) {
    run(kernelArgs());
    return;
  }
  try {
    run(kernelArgs());
  } catch (const std::exception&) {
    run(eager(false));
  }
}

}  // namespace

bool sameAlias(const at::Tensor& out, const at::Tensor& expected) {
  return out.sizes() == expected.sizes() && out.strides() == expected.strides() &&
         out.storage_offset() == expected.storage_offset() &&
         out.storage().data() == expected.storage().data() &&
         out.scalar_type() == expected.scalar_type();
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
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task holds on to the memory it uses only where it must. A tensor whose
// block the caching allocator handed out is captured as a CPU alias, which
// does not own the memory: if the program drops the tensor before the task
// ran, the block is freed at once, as on hardware. For a block of the task's
// own stream that is safe because whatever touches the block next is queued
// behind this task on the same stream; it is the rule of PyTorch's CUDA
// allocator, and it keeps a host that runs far ahead of the device from
// holding one block per queued op (and the device from walking through cold
// memory). A block of another stream could be handed to work that does not
// wait for this task, so the allocator records the task's use first (Note
// [Tasks on other streams record their use] in csrc/core/NPUStreamUses.cpp):
// the free itself happens when the program drops the tensor, where the stream
// sanitizer checks for a missing record_stream, and the block waits for the
// task before it is reused. Memory the allocator does not manage, and blocks
// of another stream used by a capturing or external stream, are captured by
// reference and kept alive until the task ran (Note [Memory held by queued
// tasks]).
//
// Note [Task captures are metadata snapshots]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Either way a capture is a snapshot of the tensor's sizes, strides, offset
// and bits at enqueue: the host goes on changing tensors in place
// (unsqueeze_, t_, resize_, as_strided_, set_) while the task waits, and the
// task must compute what the program asked for when it queued it. A CPU
// alias is a TensorImpl of its own; a tensor held by reference is held
// through a TensorImpl of its own over the same storage. Holding the
// program's TensorImpl instead made a queued `x + 1` on an empty tensor (no
// memory, so never "allocated on the stream") write into the shape that a
// later `unsqueeze_` of its result gave it, and fail.
bool mayAlias(const at::Tensor& npu, const NPUStream& stream) {
  return npu.has_storage() &&
         NPUCachingAllocator::aliasableByTask(npu.storage().data_ptr(), stream);
}

at::Tensor captureForTask(const at::Tensor& npu, const NPUStream& stream) {
  if (!npu.has_storage()) return npu;
  if (mayAlias(npu, stream)) return cpuAlias(npu);
  // See Note [Memory held by queued tasks].
  if (npu.storage().data_ptr().get() != nullptr) noteHeldByTask(stream);
  at::Tensor held = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(npu.storage()), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), npu.dtype());
  held.unsafeGetTensorImpl()->set_sizes_and_strides(npu.sizes(), npu.strides(),
                                                    npu.storage_offset());
  if (npu.is_conj()) held._set_conj(true);
  if (npu.is_neg()) held._set_neg(true);
  return held;
}

namespace {

// A tensor that owns no memory and that Python never saw: a CPU alias (its
// data pointer has no context, so nothing to free) or a Python number that
// the binding wrapped.
bool releasableAnywhere(const at::Tensor& t) {
  if (!t.defined()) return true;
  if (isNpu(t)) return false;  // held by reference (Note [Task captures and memory reuse])
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return impl->is_wrapped_number() ||
         (t.has_storage() && t.storage().data_ptr().get_context() == nullptr);
}

}  // namespace

bool releasableAnywhere(const IValue& captured) {
  if (captured.isTensor()) return releasableAnywhere(captured.toTensor());
  if (captured.isList()) {  // every list, Tensor[] included, without copying it
    for (const IValue& e : captured.toListRef()) {
      if (!releasableAnywhere(e)) return false;
    }
    return true;
  }
  return captured.isNone() || captured.isInt() || captured.isDouble() || captured.isBool() ||
         captured.isComplexDouble() || captured.isSymInt() || captured.isString() ||
         captured.isDevice() || captured.isIntList() || captured.isDoubleList() ||
         captured.isBoolList();
}

// The kernel's view of a tensor a task captured (see captureForTask): an
// alias is one already; a tensor held by reference gets its alias now.
at::Tensor kernelView(const at::Tensor& captured) {
  return isNpu(captured) ? cpuAlias(captured) : captured;
}

at::Generator cpuGenerator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// Reserves the op's random numbers now (at enqueue or before a synchronous
// run); nullopt for ops without a Generator argument. See Note [Random
// numbers are reserved at enqueue].
std::optional<SeedReservation> reserveOpSeed(const Stack& args, const OpInfo& info,
                                             c10::DeviceIndex device) {
  if (info.generatorArg < 0) return std::nullopt;
  const IValue& g = args[info.generatorArg];
  return reserveSeed(g.isGenerator() ? std::optional<at::Generator>(g.toGenerator()) : std::nullopt,
                     device);
}

Stack cpuArgs(c10::ArrayRef<IValue> args, size_t n, int generatorArg,
              const std::optional<SeedReservation>& seed) {
  return cpuArgs(args, n, generatorArg, seed, cpuAlias);
}

// Runs the out kernel straight into the device memory: the fast path, kept
// only if it neither throws nor reshapes its outputs (see Note [out= ops run
// functionally]; its warnings are held back until then, Note [Warnings of
// abandoned out= attempts]). Sets `kept`; returns the kernel's exception if it
// threw.
std::exception_ptr OutOpTask::runOutKernel(const Stack& s, bool& kept) const {
  Stack withOut = s;
  std::vector<at::Tensor> outs;
  for (size_t i = computeArgs; i < args.size(); ++i) {
    outs.push_back(outAlias(args[i].toTensor()));
    withOut.emplace_back(outs.back());
  }
  std::exception_ptr error;
  kept = attemptOutKernel(
      [&] {
        op.redispatchBoxed(kCpuKeys, &withOut);
        // See Note [Outputs are checked against their metadata].
        for (size_t i = 0; i < outs.size(); ++i) {
          if (!sameAlias(outs[i], args[computeArgs + i].toTensor())) return false;
        }
        return true;
      },
      &error);
  return error;
}

// Note [An out tensor the out kernel refused]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When the out kernel throws, the op is computed functionally. If the
// functional result fits the out tensors (same dtypes), the out kernel
// failed on something of its own (scratch space of another shape, a resize
// of device memory), and the op is marked to run functionally from now on.
// If a result has another dtype than its out tensor, the out kernel refused
// the caller's out tensor (mm.out with a double out for float inputs): that
// is the caller's error, raised as the out kernel raised it, as on CPU, and
// it says nothing about the out kernel. (Marking the op there once demoted
// every later call of it, for the whole process, after one user error.)
void OutOpTask::operator()() const {
  runOverArgs(replay.get(), deferred, args, computeArgs, generatorArg, seed,
              [this](Stack s) { run(std::move(s)); });
}

void OutOpTask::run(Stack s) const {
  const bool triedOut = !info->outVariantBroken.load(std::memory_order_relaxed);
  std::exception_ptr outError;
  if (triedOut) {
    bool kept = false;
    outError = runOutKernel(s, kept);
    if (kept) return;
  }
  computeOp.redispatchBoxed(kCpuKeys, &s);
  for (size_t r = 0; outError && r < s.size(); ++r) {
    const IValue& result = s[r];
    if (result.isTensor() &&
        result.toTensor().scalar_type() != args[computeArgs + r].toTensor().scalar_type()) {
      std::rethrow_exception(outError);
    }
  }
  if (triedOut) info->outVariantBroken.store(true, std::memory_order_relaxed);
  for (size_t r = 0; r < s.size(); ++r) {
    copyResult(*info, op.schema().name().c_str(), kernelView(args[computeArgs + r].toTensor()),
               s[r].toTensor());
  }
}

// The out= variant straight into the fresh outputs; false if it threw or
// reshaped an output (then the op itself runs; see outVariantBroken). Its
// warnings are held back until then (Note [Warnings of abandoned out=
// attempts]).
bool OpTask::runOutKernel(const Stack& s, const std::vector<at::Tensor>& outputs) const {
  Stack withOut = s;
  std::vector<at::Tensor> outs;
  outs.reserve(outputs.size());
  for (const at::Tensor& f : outputs) {
    outs.push_back(outAlias(f));
    withOut.emplace_back(outs.back());
  }
  return attemptOutKernel([&] {
    outOp->redispatchBoxed(kCpuKeys, &withOut);
    // See Note [Outputs are checked against their metadata].
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!sameAlias(outs[i], outputs[i])) return false;
    }
    return true;
  });
}

// Copies the kernel's fresh results into the outputs allocated for them.
void OpTask::copyFreshResults(const Stack& s, const std::vector<at::Tensor>& outputs) const {
  const std::vector<ReturnInfo>& returns = info->returns;
  const char* name = op.schema().name().c_str();
  size_t next = 0;
  // A list result may have another length than its meta twin.
  auto nextOutput = [&]() -> const at::Tensor& {
    TORCH_CHECK(next < outputs.size(), name, ": the CPU kernel returned more ",
                "tensors than the meta kernel", NPU_ERROR_SUFFIX);
    return outputs[next++];
  };
  for (size_t r = 0; r < returns.size(); ++r) {
    if (returns[r].kind != ReturnKind::kNew) continue;
    if (returns[r].isList) {
      for (const at::Tensor& t : s[r].toTensorVector()) {
        const at::Tensor& f = nextOutput();
        if (f.defined()) copyResult(*info, name, kernelView(f), t);
      }
    } else {
      const at::Tensor& f = nextOutput();
      if (f.defined()) copyResult(*info, name, kernelView(f), s[r].toTensor());
    }
  }
  TORCH_CHECK(next == outputs.size(), name, ": the CPU kernel returned fewer ",
              "tensors than the meta kernel", NPU_ERROR_SUFFIX);
}

void OpTask::operator()() const {
  // See Note [Aliases are made where the kernel runs].
  const std::vector<at::Tensor> made =
      deferred.hasOutputs() ? deferred.outputs() : std::vector<at::Tensor>();
  const std::vector<at::Tensor>& outputs = deferred.hasOutputs() ? made : fresh;
  runOverArgs(replay.get(), deferred, args, args.size(), generatorArg, seed,
              [this, &outputs](Stack s) { run(std::move(s), outputs); });
}

void OpTask::run(Stack s, const std::vector<at::Tensor>& outputs) const {
  if (outOp.has_value() && runOutKernel(s, outputs)) return;
  {
    // See Note [Results computed in place of the output].
    const ResultPlacement placement(outputs);
    op.redispatchBoxed(kCpuKeys, &s);
  }
  if (outOp.has_value()) info->outVariantBroken.store(true, std::memory_order_relaxed);
  copyFreshResults(s, outputs);
}

}  // namespace c10_npu::aten::detail
