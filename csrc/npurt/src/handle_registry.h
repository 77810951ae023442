// Registry of live streams or events, keyed by process-unique id. See
// Note [Handle validation] in csrc/npurt/README.md.
//
// Note [Handle encoding]
// ~~~~~~~~~~~~~~~~~~~~~~
// A handle is not a pointer: it is `tag | id`, with a per-type tag in the top
// 16 bits (kStreamTag, kEventTag, kGraphTag, kGraphExecTag, kMemHandleTag)
// and the id (1, 2, ..., never reused) below. Tagged values are non-canonical
// addresses, so a handle that someone dereferences faults at once, and a
// stream handle passed as an event (or any garbage) fails the lookup instead
// of reaching an object.
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
#include <vector>

namespace npurt::internal {

constexpr uint64_t kHandleTagMask = uint64_t{0xFFFF} << 48;
constexpr uint64_t kStreamTag = uint64_t{0x5354} << 48;     // "ST"
constexpr uint64_t kEventTag = uint64_t{0x4556} << 48;      // "EV"
constexpr uint64_t kGraphTag = uint64_t{0x4752} << 48;      // "GR"
constexpr uint64_t kGraphExecTag = uint64_t{0x4758} << 48;  // "GX"
constexpr uint64_t kDeferredTag = uint64_t{0x4452} << 48;   // "DR"
constexpr uint64_t kMemHandleTag = uint64_t{0x4D48} << 48;  // "MH": npuMemCreate

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
    CacheEntry& entry = cacheEntry();  // one thread-local access, no guard
    const uint64_t epoch = epoch_.load(std::memory_order_acquire);
    if (entry.id == id && entry.epoch == epoch && id != 0) [[likely]] {
      return entry.object;
    }
    if (entry.gone) [[unlikely]]
      return findPinned(id);
    std::shared_ptr<T> object = find(id);
    if (object == nullptr) return nullptr;
    // The epoch read *before* find(): if an erase raced with us, the cache
    // entry is stale-tagged and refreshed by the next call.
    T* raw = object.get();
    cacheRef().object = std::move(object);  // keeps `raw` alive (see CacheRef)
    entry.id = id;
    entry.epoch = epoch;
    entry.object = raw;
    return raw;
  }

 private:
  // The hot half of a thread's cache: trivially destructible and constant-
  // initialised, so reading it costs one thread-local access with no
  // initialisation guard, and it stays readable during thread exit (Note
  // [Last error storage] in errors.cpp gives the rule).
  struct CacheEntry {
    uint64_t id;
    uint64_t epoch;  // registry epochs start at 1: a fresh entry never matches
    T* object;       // kept alive by the thread's CacheRef
    bool gone;       // the CacheRef was destroyed (thread exit)
  };
  static CacheEntry& cacheEntry() noexcept {
    static thread_local constinit CacheEntry entry{0, 0, nullptr, false};
    return entry;
  }
  // The strong reference behind CacheEntry::object. Its destructor (thread
  // exit) invalidates the entry; later calls on this thread, made from other
  // thread-local destructors, then take findPinned().
  struct CacheRef {
    std::shared_ptr<T> object;
    CacheRef() = default;
    CacheRef(const CacheRef&) = delete;
    CacheRef& operator=(const CacheRef&) = delete;
    ~CacheRef() {
      CacheEntry& entry = cacheEntry();
      entry.id = 0;
      entry.object = nullptr;
      entry.gone = true;
    }
  };
  static CacheRef& cacheRef() noexcept {
    static thread_local CacheRef ref;
    return ref;
  }

  // findCached() after the thread's cache is gone (a call from a late
  // thread-local destructor): the strong reference that keeps the result
  // alive goes to a never-destroyed list instead. Leaks one reference per
  // such call, which is rare and bounded by the calls made during exit.
  T* findPinned(uint64_t id) const {
    std::shared_ptr<T> object = find(id);
    if (object == nullptr) return nullptr;
    static auto* const pinned = new std::vector<std::shared_ptr<T>>();  // never destroyed
    static std::mutex* const pinnedMutex = new std::mutex();
    std::lock_guard<std::mutex> lock(*pinnedMutex);
    pinned->push_back(object);
    return object.get();
  }

  const uint64_t tag_;
  std::atomic<uint64_t> nextId_{1};
  std::atomic<uint64_t> epoch_{1};
  mutable std::shared_mutex mutex_;  // guards map_
  std::unordered_map<uint64_t, std::shared_ptr<T>> map_;
};

}  // namespace npurt::internal
