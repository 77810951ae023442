// The synchronous op path; see SynchronousOp.h.
#include "aten/SynchronousOp.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

#include <memory>
#include <unordered_map>

#include "aten/OpLauncher.h"
#include "aten/OpTask.h"
#include "core/CPUAlias.h"
#include "core/HostSync.h"
#include "core/NPUFunctions.h"

namespace c10_npu::aten::detail {
namespace {

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

// Note [Writes through overlapping tensors run synchronously]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Most CPU kernels refuse to write a tensor in which several elements share
// one memory location (an expanded tensor as `out` or `self` of an in-place
// op): "unsupported operation: more than one element of the written-to
// tensor refers to a single memory location". On the device that check would
// run in the task and fail the stream later, far from the call; a few
// kernels (fill_, zero_, the in-place metadata ops) accept such a tensor. So
// an op that writes one runs on the synchronous path, where its CPU kernel
// decides at the call, exactly as on CPU: an out= op runs its own out kernel
// there, not its functional counterpart, whose result would then have to be
// copied into the overlapping tensor. The same holds for a written tensor
// that partly overlaps another argument (`torch.add(x[:-1], 1,
// out=x[1:])`: "some elements of the input tensor and the written-to tensor
// refer to a single memory location"). Such writes are rare and mostly
// mistakes, so the host sync costs nothing that matters.
}  // namespace

bool writesOverlappingMemory(const Stack& args, const OpInfo& info) {
  bool overlapping = false;
  for (const int a : info.writtenArgs) {
    forEachNpuTensor(args[static_cast<size_t>(a)], [&](const at::Tensor& written) {
      if (overlapping || !written.defined()) return;
      if (at::has_internal_overlap(written) == at::MemOverlap::Yes) {
        overlapping = true;
        return;
      }
      for (const IValue& arg : args) {
        forEachNpuTensor(arg, [&](const at::Tensor& other) {
          overlapping = overlapping || (other.defined() && at::get_overlap_status(written, other) ==
                                                              at::MemOverlapStatus::Partial);
        });
      }
    });
    if (overlapping) return true;
  }
  return false;
}

namespace {

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

// Queues the kernel of `computeOp` on the first computeArgs arguments as a
// task on `stream`, and waits for it; raises the kernel's exception.
std::shared_ptr<SyncOutcome> runKernelAndWait(const c10::OperatorHandle& op,
                                              const c10::OperatorHandle& computeOp,
                                              const Stack& args, size_t computeArgs,
                                              const OpInfo& info, const NPUStream& stream,
                                              c10::DeviceIndex device) {
  const std::optional<SeedReservation> seed = reserveOpSeed(args, info, device);
  auto outcome = std::make_shared<SyncOutcome>();
  const int generatorArg = info.generatorArg;
  // Note [Kernels the host waits for raise at the call].
  launchKernelAndWait(
      stream, op.schema().name().c_str(), opAccess(args, info, {}),
      [computeOp, computeArgs, args, generatorArg, seed, outcome] {
        // Note [Aliases of one storage share one storage].
        SharedStorageAliases aliases;
        for (size_t i = 0; i < computeArgs; ++i) {
          forEachNpuTensor(args[i], [&](const at::Tensor& t) { aliases.note(t); });
        }
        Stack s = cpuArgs(args, computeArgs, generatorArg, seed, [&](const at::Tensor& t) {
          at::Tensor alias = aliases.alias(t);
          outcome->npuOfAlias.emplace(alias.unsafeGetTensorImpl(), t.unsafeGetTensorImpl());
          return alias;
        });
        computeOp.redispatchBoxed(kCpuKeys, &s);
        outcome->results = std::move(s);
      });
  return outcome;
}

// The functional kernel's results, moved into the out arguments. See Note
// [Out arguments the CPU kernel resized].
Stack moveIntoOutArgs(const Stack& args, size_t computeArgs, const OpInfo& info,
                      const SyncOutcome& outcome) {
  Stack results;
  for (size_t r = 0; r < info.numOutArgs; ++r) {
    const at::Tensor& out = args[computeArgs + r].toTensor();
    const at::Tensor& result = outcome.results.at(r).toTensor();
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    results.emplace_back(out);
  }
  return results;
}

// The kernel's results on the device: the npu argument a kernel returned, or
// a fresh npu copy of a result.
Stack resultsOnDevice(const Stack& args, SyncOutcome& outcome, const NPUStream& stream,
                      c10::DeviceIndex device) {
  std::unordered_map<const c10::TensorImpl*, at::Tensor> npuArgs;
  for (const IValue& a : args) {
    forEachNpuTensor(a, [&](const at::Tensor& t) { npuArgs.emplace(t.unsafeGetTensorImpl(), t); });
  }
  auto toNpu = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined()) return r;
    auto alias = outcome.npuOfAlias.find(r.unsafeGetTensorImpl());
    if (alias != outcome.npuOfAlias.end()) {
      const at::Tensor& npu = npuArgs.at(alias->second);
      if (!sameAlias(r, npu)) adoptResized(npu, r);
      return npu;
    }
    if (!r.device().is_cpu()) return r;
    return resultToNpu(r, stream, device);
  };
  Stack results = std::move(outcome.results);
  mapResultTensors(results, toNpu);
  return results;
}

}  // namespace

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

void runSynchronously(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex device,
                      const OpInfo& info) {
  // Before anything is queued: Note [Host syncs of the op path].
  noteHostSync(op.schema().name().c_str());
  const NPUStream stream = getCurrentNPUStream(device);
  const size_t nargs = op.schema().arguments().size();
  Stack args(stack->end() - nargs, stack->end());
  // See Note [Out arguments the CPU kernel resized].
  // and Note [Writes through overlapping tensors run synchronously].
  const bool viaFunctional =
      info.functionalVariant.has_value() && !writesOverlappingMemory(args, info);
  const size_t computeArgs = viaFunctional ? nargs - info.numOutArgs : nargs;
  const c10::OperatorHandle computeOp = viaFunctional ? *info.functionalVariant : op;
  auto outcome = runKernelAndWait(op, computeOp, args, computeArgs, info, stream, device);
  Stack results = viaFunctional ? moveIntoOutArgs(args, computeArgs, info, *outcome)
                                : resultsOnDevice(args, *outcome, stream, device);
  replaceArgsWithResults(stack, nargs, results);
}

}  // namespace c10_npu::aten::detail
