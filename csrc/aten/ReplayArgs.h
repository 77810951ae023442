// The CPU arguments of a captured op task, built once for all its replays.
// Internal to csrc/aten; used by the op tasks (OpTask.h).
//
// Note [Replayed op tasks build their arguments once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An eager op task runs once, so it turns its captures into the CPU kernel's
// arguments when it runs (cpuArgs in OpTask.h). A task recorded into a graph
// (Note [Replayed op tasks] in OpLauncher.h) runs at every replay with the
// same captures, and redoing that work at each replay was most of what a
// replayed node cost besides the kernel itself. So a recorded task builds,
// on the host thread that records it, the parts that cannot change between
// replays:
//  - the CPU alias of every npu tensor it holds by reference (Note [Task
//    captures and memory reuse]): the task owns that storage for the graph's
//    lifetime, so the alias stays valid as long as the storage keeps its
//    memory. A storage can be given new memory behind the task's back
//    (resize_ past its size, untyped_storage().resize_), so each replay
//    compares the storage's data pointer and size with the ones the alias
//    was made for, and makes a fresh alias if they changed: a replay reads
//    the memory the storage has then, as an eager task would;
//  - the promotion of wrapped numbers (see Note [Wrapped numbers of
//    pointwise ops] in WrappedNumbers.h).
// A replay then copies the prepared stack (reference counts, no TensorImpl
// made) and resolves its random seed (Note [Random numbers of captured ops]).
// Task-group updates record their tasks the same way, so the next replay
// runs the new arguments, prepared just as the captured ones were.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "aten/OpArgs.h"
#include "core/NPUGenerator.h"

namespace c10_npu::aten::detail {

class ReplayArgs {
 public:
  // Prepares the first `n` of `captured` (the task's captured arguments,
  // after captureForTask) for the CPU kernel of `op`. Runs on the recording
  // host thread. Thread-safe (reads its arguments only).
  ReplayArgs(const c10::OperatorHandle& op, const Stack& captured, size_t n);

  // The kernel's arguments for one run: the prepared stack, with fresh
  // aliases where a held storage has new memory and the generator seeded
  // from `seed` (argument `generatorArg`, -1 for none). `captured` must be
  // the stack the arguments were prepared from. Thread-safe (const); only
  // inside tasks.
  Stack forRun(c10::ArrayRef<IValue> captured, int generatorArg,
               const std::optional<SeedReservation>& seed) const;

  // Whether a wrapped number was promoted (Note [Wrapped numbers of
  // pointwise ops] in WrappedNumbers.h). Thread-safe.
  bool promoted() const noexcept { return promoted_; }

 private:
  // An argument whose alias was made from a tensor held by reference, and
  // the memory it was made for.
  struct HeldAlias {
    size_t index;
    const void* data;
    size_t nbytes;
  };

  Stack stack_;
  std::vector<HeldAlias> held_;
  // Arguments with npu tensors that are not prepared (in lists, or without
  // storage): mapped at every run, as an eager task maps them.
  std::vector<size_t> perRun_;
  bool promoted_ = false;
};

}  // namespace c10_npu::aten::detail
