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
// The table is append-only and never changes an entry: an index, once
// handed out, names the same triple for the life of the process. It holds
// at most kCapacity triples; past that, intern() says kNone and the caller
// encodes the task in full (two entries). Lookups go through a hash index
// (open addressing) whose slots are written once, from 0 to the entry's
// index + 1, with release, after the entry itself: so finding a triple is
// a few loads from lines that nobody writes any more, shared by every core,
// with no lock and no thread-local state; only a triple seen for the first
// time takes the mutex.
//
// Thread safety: intern() and at() are thread-safe. at(i) may be called by a
// thread that got `i` from intern() or through a happens-before chain from
// such a call (for the executor: the ring entry's release/acquire).
#pragma once

#include <atomic>
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
  // intern()'s answer when the table is full.
  static constexpr uint32_t kNone = UINT32_MAX;

  // Index of the triple, interning it if new; kNone if it cannot be
  // interned. Thread-safe, never throws; lock-free unless the triple is new.
  static uint32_t intern(const char* name, RunFn run, ReleaseFn release) noexcept {
    const uint64_t hash = hashOf(name, run, release);
    for (uint64_t slot = hash;; ++slot) {
      // acquire: pairs with internSlow's release (the entry's fields).
      const uint32_t found = index_[slot & (kIndexSlots - 1)].load(std::memory_order_acquire);
      if (found == 0) {
        // New, or not interned because the table is full: then stay off
        // the mutex (relaxed: a stale count only sends us to internSlow).
        if (count_.load(std::memory_order_relaxed) == kCapacity) return kNone;
        return internSlow(name, run, release, hash);
      }
      const Descriptor& d = table_[found - 1];
      if (d.run == run && d.name == name && d.release == release) return found - 1;
    }
  }

  // The triple at `index` (a value intern() returned). Thread-safe, see the
  // file comment.
  static const Descriptor& at(uint32_t index) noexcept { return table_[index]; }

 private:
  // Slots of the hash index: twice the capacity, so that probes stay short
  // and always reach a free slot.
  static constexpr uint64_t kIndexSlots = 2 * kCapacity;

  static uint64_t hashOf(const char* name, RunFn run, ReleaseFn release) noexcept {
    uint64_t h = reinterpret_cast<uintptr_t>(run) * 0x9E3779B97F4A7C15ull;
    h ^= reinterpret_cast<uintptr_t>(name) * 0xC2B2AE3D27D4EB4Full;
    h ^= reinterpret_cast<uintptr_t>(release) * 0x165667B19E3779F9ull;
    return h ^ (h >> 29);
  }
  // Under the mutex: finds or appends the triple (probing from `hash`).
  static uint32_t internSlow(const char* name, RunFn run, ReleaseFn release,
                             uint64_t hash) noexcept;

  // Constant-initialised, never destroyed: usable during static
  // destruction too. table_[i] is written once, before index_ names it.
  static inline Descriptor table_[kCapacity] = {};
  static inline std::atomic<uint32_t> index_[kIndexSlots] = {};  // table index + 1; 0 = free
  static inline std::atomic<uint32_t> count_{0};  // entries in use; written under the mutex
};

}  // namespace npurt::internal
