// TaskDescriptors: the process-wide table of interned user-task descriptors.
//
// Note [Task descriptors]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A user task (npuLaunchTask without npuTaskCopyName) is four words: name,
// run, release and userData. From one launch to the next at a call site only
// userData changes: the name has static storage duration (npuLaunchTask
// contract) and run/release are the functions of the call site (for
// npurt::launch, one pair per callable type). So the triple (name, run,
// release) is interned here, once per distinct triple, and a ring entry
// carries its index and userData: one 16-byte entry per user task, as for a
// host function (Note [Ring entries] in task_queue.h).
//
// The table is append-only and never frees an entry: an index, once handed
// out, names the same triple for the life of the process, so the consumer
// reads it without synchronisation beyond the ring's own publication. It
// holds at most kCapacity triples; past that, intern() says kNone and the
// caller encodes the task in full (two entries). Each thread keeps a small
// direct-mapped cache of recent triples, so the hot path is a few loads on
// the thread's own lines; a miss takes the table's mutex.
//
// Thread safety: intern() and at() are thread-safe. at(i) may be called by a
// thread that got `i` from intern() or through a happens-before chain from
// such a call (for the executor: the ring entry's release/acquire).
#pragma once

#include <cstddef>
#include <cstdint>

namespace npurt::internal {

class TaskDescriptors {
 public:
  using RunFn = int (*)(void*, char*, size_t);
  using ReleaseFn = void (*)(void*);

  struct Descriptor {
    const char* name;  // as given (null -> "task" when reported)
    RunFn run;
    ReleaseFn release;
  };

  // Triples the table holds at most (24 bytes each).
  static constexpr uint32_t kCapacity = 4096;
  // intern()'s answer when the table is full (or out of memory).
  static constexpr uint32_t kNone = UINT32_MAX;

  // Index of the triple, interning it if new; kNone if it cannot be
  // interned. Thread-safe, never throws.
  static uint32_t intern(const char* name, RunFn run, ReleaseFn release) noexcept;

  // The triple at `index` (a value intern() returned). Thread-safe, see the
  // file comment.
  static const Descriptor& at(uint32_t index) noexcept;
};

}  // namespace npurt::internal
