// The interned user-task descriptors. See Note [Task descriptors] in
// task_descriptors.h.
#include "task_descriptors.h"

#include <mutex>

namespace npurt::internal {
namespace {

using Descriptor = TaskDescriptors::Descriptor;

// Slots of the table's index (open addressing, linear probing): twice the
// capacity, so that a probe stays short even when the table is full.
constexpr uint32_t kIndexSlots = 2 * TaskDescriptors::kCapacity;
// Entries of a thread's cache.
constexpr uint32_t kCacheSlots = 64;
static_assert((kIndexSlots & (kIndexSlots - 1)) == 0 && (kCacheSlots & (kCacheSlots - 1)) == 0);

template <typename T>
uint64_t bits(T pointer) noexcept {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer));
}

uint64_t hashOf(const char* name, TaskDescriptors::RunFn run,
                TaskDescriptors::ReleaseFn release) noexcept {
  uint64_t h = bits(run) * 0x9E3779B97F4A7C15ull;
  h ^= bits(name) * 0xC2B2AE3D27D4EB4Full;
  h ^= bits(release) * 0x165667B19E3779F9ull;
  return h ^ (h >> 29);
}

bool same(const Descriptor& d, const char* name, TaskDescriptors::RunFn run,
          TaskDescriptors::ReleaseFn release) noexcept {
  return d.run == run && d.name == name && d.release == release;
}

// Constant-initialised and trivially destructible, so that a thread that
// launches during static destruction still finds them intact.
Descriptor gTable[TaskDescriptors::kCapacity];
uint32_t gIndex[kIndexSlots];  // table index + 1 of the triple hashed here; 0 = free
uint32_t gCount = 0;           // entries of gTable in use
std::mutex gMutex;             // guards the three above when written

// The thread's recent triples. index + 1 as in gIndex, 0 = empty.
struct CacheEntry {
  Descriptor descriptor;
  uint32_t indexPlusOne;
};

uint32_t internSlow(const char* name, TaskDescriptors::RunFn run,
                    TaskDescriptors::ReleaseFn release, uint64_t hash) noexcept {
  std::lock_guard<std::mutex> lock(gMutex);
  for (uint32_t slot = static_cast<uint32_t>(hash);; ++slot) {
    uint32_t& found = gIndex[slot & (kIndexSlots - 1)];
    if (found == 0) {
      // Not interned yet. The table never fills its index (twice as many
      // slots), so the probe always ends at a free slot.
      if (gCount == TaskDescriptors::kCapacity) return TaskDescriptors::kNone;
      gTable[gCount] = Descriptor{name, run, release};
      found = ++gCount;
      return gCount - 1;
    }
    if (same(gTable[found - 1], name, run, release)) return found - 1;
  }
}

}  // namespace

uint32_t TaskDescriptors::intern(const char* name, RunFn run, ReleaseFn release) noexcept {
  static thread_local constinit CacheEntry cache[kCacheSlots] = {};
  const uint64_t hash = hashOf(name, run, release);
  CacheEntry& entry = cache[(hash >> 32) & (kCacheSlots - 1)];
  if (entry.indexPlusOne != 0 && same(entry.descriptor, name, run, release)) [[likely]] {
    return entry.indexPlusOne - 1;
  }
  const uint32_t index = internSlow(name, run, release, hash);
  if (index != kNone) entry = CacheEntry{Descriptor{name, run, release}, index + 1};
  return index;
}

const TaskDescriptors::Descriptor& TaskDescriptors::at(uint32_t index) noexcept {
  return gTable[index];
}

}  // namespace npurt::internal
