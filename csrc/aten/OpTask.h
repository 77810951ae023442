// The task of an op on the generic op path (AsyncFallback.cpp): what it
// captures at enqueue, how it hands its arguments to the CPU kernel, and its
// body, which runs on a device executor. Internal to csrc/aten.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "aten/DeferredArgs.h"
#include "aten/OpArgs.h"
#include "aten/OpLauncher.h"
#include "aten/OpPlan.h"
#include "aten/ReplayArgs.h"
#include "core/NPUGenerator.h"
#include "core/NPUStream.h"

namespace c10_npu::aten::detail {

// What the op's task reads and writes (Note [Poisoned memory]): every npu
// argument is read except the out= arguments, which are only written; the
// arguments annotated as written and the fresh outputs are written.
// Thread-safe (reads its arguments only).
TaskAccess opAccess(const Stack& args, const OpInfo& info, const std::vector<at::Tensor>& fresh);

// How a task captures an npu argument: a CPU alias or the tensor itself.
// See Note [Task captures and memory reuse] in OpTask.cpp. Thread-safe.
at::Tensor captureForTask(const at::Tensor& npu, const NPUStream& stream);

// Whether a task on `stream` may capture `npu` (an npu tensor) as a CPU
// alias rather than by reference: see Note [Task captures and memory reuse]
// in OpTask.cpp. Thread-safe.
bool mayAlias(const at::Tensor& npu, const NPUStream& stream);

// Whether a captured argument (after captureForTask) may be destroyed on any
// thread: it holds nothing but non-owning CPU aliases, wrapped Python
// numbers and plain values. See Note [Tasks that hold only aliases are
// released where they ran] in OpLauncher.h. Thread-safe.
bool releasableAnywhere(const IValue& captured);

// The kernel's view of a tensor a task captured (see captureForTask): an
// alias is one already; a tensor held by reference gets its alias now.
// Thread-safe; only inside tasks.
at::Tensor kernelView(const at::Tensor& captured);

// Whether `out` has exactly the metadata and memory of `expected`: an out
// kernel left its output alias as it was given (Note [Outputs are checked
// against their metadata] in OpTask.cpp). Thread-safe.
bool sameAlias(const at::Tensor& out, const at::Tensor& expected);

// Reserves the op's random numbers now (at enqueue or before a synchronous
// run); nullopt for ops without a Generator argument. See Note [Random
// numbers are reserved at enqueue]. Thread-safe.
std::optional<SeedReservation> reserveOpSeed(const Stack& args, const OpInfo& info,
                                             c10::DeviceIndex device);

// A CPU generator that draws the numbers reserved as `seed`. Thread-safe.
at::Generator cpuGenerator(uint64_t seed);

// The first n arguments as the CPU kernel takes them: npu tensors as CPU
// aliases, the generator as a CPU generator seeded from the reserved seed.
// Only inside tasks (aliases read device memory).
// `alias` makes the CPU view of each npu tensor (cpuAlias, or a wrapper that
// also remembers which alias is which argument).
template <typename AliasFn>
Stack cpuArgs(c10::ArrayRef<IValue> args, size_t n, int generatorArg,
              const std::optional<SeedReservation>& seed, const AliasFn& alias) {
  Stack s;
  s.reserve(args.size());
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == generatorArg) {
      s.emplace_back(cpuGenerator(seed->resolve()));  // per replay when captured
    } else {
      s.push_back(mapTensors(args[i], alias, c10::DeviceType::CPU));
    }
  }
  return s;
}

Stack cpuArgs(c10::ArrayRef<IValue> args, size_t n, int generatorArg,
              const std::optional<SeedReservation>& seed);

// The task of an out= op (Note [out= ops run functionally]): the out kernel
// straight into the out arguments, else the functional kernel and a copy.
// Runs on an executor; run again at every replay when captured (Note
// [Replayed op tasks] in OpLauncher.h), so it consumes nothing it captured.
struct OutOpTask {
  c10::OperatorHandle op;         // the out= op
  c10::OperatorHandle computeOp;  // its functional variant
  TaskArgs args;                  // all arguments, captured (captureForTask)
  size_t computeArgs;             // the arguments before the out arguments
  int generatorArg;
  std::optional<SeedReservation> seed;
  const OpInfo* info;  // stable: plans are never freed
  // Set when the task is recorded into a graph: the compute arguments,
  // prepared once (Note [Replayed op tasks build their arguments once]).
  std::unique_ptr<const ReplayArgs> replay;
  // Compute arguments taken by value, None in `args` (eager tasks only;
  // Note [Aliases are made where the kernel runs]).
  DeferredArgs deferred;

  void operator()() const;

 private:
  void run(Stack s) const;
  // The out kernel's exception when it threw, else null. See Note [An out
  // tensor the out kernel refused].
  std::exception_ptr runOutKernel(const Stack& s, bool& kept) const;
};

// The task of any other op: its out= variant (outOp) straight into the fresh
// outputs when it has one, else the op itself and a copy of its fresh
// results. Runs on an executor; run again at every replay when captured.
struct OpTask {
  c10::OperatorHandle op;
  TaskArgs args;  // captured (captureForTask)
  // CPU aliases of the fresh outputs (lists flattened); empty when
  // `deferred` took them (Note [Aliases are made where the kernel runs]).
  std::vector<at::Tensor> fresh;
  std::optional<c10::OperatorHandle> outOp;  // set when every fresh output is defined
  int generatorArg;
  std::optional<SeedReservation> seed;
  const OpInfo* info;  // stable: plans are never freed
  // Set when the task is recorded into a graph (as OutOpTask::replay).
  std::unique_ptr<const ReplayArgs> replay;
  DeferredArgs deferred;  // as OutOpTask::deferred, and the fresh outputs

  void operator()() const;

 private:
  void run(Stack s, const std::vector<at::Tensor>& outputs) const;
  bool runOutKernel(const Stack& s, const std::vector<at::Tensor>& outputs) const;
  void copyFreshResults(const Stack& s, const std::vector<at::Tensor>& outputs) const;
};

}  // namespace c10_npu::aten::detail
