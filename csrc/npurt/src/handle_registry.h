// Registry of live streams or events, keyed by process-unique id. See
// Note [Handle validation] in csrc/npurt/README.md.
//
// Note [Handle encoding]
// ~~~~~~~~~~~~~~~~~~~~~~
// A handle is not a pointer: it is `tag | id`, with a per-type tag in the top
// 16 bits (kStreamTag, kEventTag) and the id (1, 2, ..., never reused) below.
// Tagged values are non-canonical addresses, so a handle that someone
// dereferences faults at once, and a stream handle passed as an event (or
// any garbage) fails the lookup instead of reaching an object.
//
// Hot-path lookup: each thread caches its last successful lookup per type
// (id, epoch, strong reference). The cache is valid while the registry's
// epoch is unchanged; erase() bumps the epoch, so a destroyed handle is
// rejected on the next call of every thread. Creating objects leaves the
// epoch alone: a cached id cannot be affected by a new one. The common case
// is therefore one acquire load of a rarely written counter.
//
// Thread safety: all functions are thread-safe. findCached() returns a raw
// pointer kept alive by the calling thread's cache: valid until the same
// thread's next findCached() on this registry type; callers that look up
// two objects or call out to user code use find().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace npurt::internal {

constexpr uint64_t kHandleTagMask = uint64_t{0xFFFF} << 48;
constexpr uint64_t kStreamTag = uint64_t{0x5354} << 48;  // "ST"
constexpr uint64_t kEventTag = uint64_t{0x4556} << 48;   // "EV"

template <typename T>
class HandleRegistry {
 public:
  explicit HandleRegistry(uint64_t tag) noexcept : tag_(tag) {}
  HandleRegistry(const HandleRegistry&) = delete;
  HandleRegistry& operator=(const HandleRegistry&) = delete;

  // A fresh id (1, 2, ...). relaxed: uniqueness is all that matters.
  uint64_t newId() noexcept { return nextId_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t toHandle(uint64_t id) const noexcept { return tag_ | id; }
  // The id in a handle, or 0 if the tag is wrong (garbage or other type).
  uint64_t toId(uint64_t handle) const noexcept {
    return (handle & kHandleTagMask) == tag_ ? handle & ~kHandleTagMask : 0;
  }

  void insert(uint64_t id, std::shared_ptr<T> object) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    map_.emplace(id, std::move(object));
  }

  // Removes the id; returns the object (null if it was not live).
  std::shared_ptr<T> erase(uint64_t id) {
    std::shared_ptr<T> object;
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      const auto it = map_.find(id);
      if (it == map_.end()) return nullptr;
      object = std::move(it->second);
      map_.erase(it);
      // release: a thread that reads the new epoch (acquire) and then misses
      // its cache finds the id gone from the map.
      epoch_.fetch_add(1, std::memory_order_release);
    }
    return object;
  }

  std::shared_ptr<T> find(uint64_t id) const {
    if (id == 0) return nullptr;
    std::shared_lock<std::shared_mutex> lock(mutex_);
    const auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }

  // Hot path: see Note [Handle encoding].
  T* findCached(uint64_t id) const {
    Cache& cache = threadCache();
    const uint64_t epoch = epoch_.load(std::memory_order_acquire);
    if (cache.id == id && cache.epoch == epoch && id != 0) [[likely]] {
      return cache.object.get();
    }
    std::shared_ptr<T> object = find(id);
    if (object == nullptr) return nullptr;
    // The epoch read *before* find(): if an erase raced with us, the cache
    // entry is stale-tagged and refreshed by the next call.
    cache.object = std::move(object);
    cache.id = id;
    cache.epoch = epoch;
    return cache.object.get();
  }

 private:
  struct Cache {
    uint64_t id = 0;
    uint64_t epoch = 0;  // registry epochs start at 1: a fresh cache never matches
    std::shared_ptr<T> object;
  };
  // One cache per thread and object type (each type has one registry).
  static Cache& threadCache() noexcept {
    static thread_local Cache cache;
    return cache;
  }

  const uint64_t tag_;
  std::atomic<uint64_t> nextId_{1};
  std::atomic<uint64_t> epoch_{1};
  mutable std::shared_mutex mutex_;  // guards map_
  std::unordered_map<uint64_t, std::shared_ptr<T>> map_;
};

}  // namespace npurt::internal
