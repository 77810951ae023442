// The interned user-task descriptors: the slow path of intern(). See
// Note [Task descriptors] in task_descriptors.h.
#include "task_descriptors.h"

#include <mutex>

namespace npurt::internal {
namespace {

std::mutex gMutex;  // serialises insertions

}  // namespace

uint32_t TaskDescriptors::internSlow(const char* name, RunFn run, ReleaseFn release,
                                     uint64_t hash) noexcept {
  std::lock_guard<std::mutex> lock(gMutex);
  for (uint64_t slot = hash;; ++slot) {
    std::atomic<uint32_t>& found = index_[slot & (kIndexSlots - 1)];
    // relaxed: slots are written only under the mutex we hold.
    const uint32_t indexPlusOne = found.load(std::memory_order_relaxed);
    if (indexPlusOne == 0) {
      // Not interned (by another thread since our lock-free look either).
      const uint32_t count = count_.load(std::memory_order_relaxed);
      if (count == kCapacity) return kNone;
      table_[count] = Descriptor{name, run, release};
      count_.store(count + 1, std::memory_order_relaxed);
      // release: a thread that finds the slot sees the entry.
      found.store(count + 1, std::memory_order_release);
      return count;
    }
    const Descriptor& d = table_[indexPlusOne - 1];
    if (d.run == run && d.name == name && d.release == release) return indexPlusOne - 1;
  }
}

}  // namespace npurt::internal
