// See PoisonedMemory.h and Note [Poisoned memory].
#include "core/PoisonedMemory.h"

#include <mutex>
#include <unordered_map>

#include "core/NPUException.h"
#include "core/StorageAlias.h"

namespace c10_npu::poison {
namespace detail {
std::atomic<size_t> gPoisonedCount{0};
}

namespace {

struct Entry {
  StorageRef storage;  // keeps the address from being reused while marked
  Message message;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const c10::StorageImpl*, Entry> marks;  // guarded by mutex
};

// Leaked: tasks may be released during process exit, after static
// destructors ran.
Registry& registry() {
  static auto* r = std::make_unique<Registry>().release();
  return *r;
}

// Drops the marks nobody can read any more: the storage is gone and no task
// holds a reference to it (the registry's is the only weak one left).
// Lock held. Called when a mark is added, so the map stays as small as the
// number of poisoned storages that are still reachable.
void sweep(Registry& r) {
  for (auto it = r.marks.begin(); it != r.marks.end();) {
    if (it->second.storage.expired() && it->second.storage.weak_use_count() == 1) {
      it = r.marks.erase(it);
    } else {
      ++it;
    }
  }
  detail::gPoisonedCount.store(r.marks.size(), std::memory_order_relaxed);
}

}  // namespace

Message find(const c10::StorageImpl* storage) noexcept {
  if (!any() || storage == nullptr) return nullptr;
  const c10::StorageImpl* source = aliasSource(storage);  // Note [Storage aliases]
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.marks.find(storage);
  if (it == r.marks.end() && source != nullptr) it = r.marks.find(source);
  return it == r.marks.end() ? nullptr : it->second.message;
}

void mark(const StorageRef& storage, const Message& message) noexcept {
  if (message == nullptr) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  try {
    sweep(r);
    const c10::StorageImpl* key = storage._unsafe_get_target();
    if (key == nullptr) return;
    r.marks.emplace(key, Entry{storage, message});
  } catch (...) {
    // Out of memory: the mark is lost rather than an executor crashed.
  }
  detail::gPoisonedCount.store(r.marks.size(), std::memory_order_relaxed);
}

void clear(const c10::StorageImpl* storage) noexcept {
  if (!any() || storage == nullptr) return;
  const c10::StorageImpl* source = aliasSource(storage);  // Note [Storage aliases]
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.marks.erase(storage);
  if (source != nullptr) r.marks.erase(source);
  detail::gPoisonedCount.store(r.marks.size(), std::memory_order_relaxed);
}

std::string describe(const Message& message) {
  return "the npu tensor holds no valid data, because the work that produced it did not run: " +
         (message != nullptr ? *message : std::string("(unknown failure)"));
}

void raiseIfPoisoned(const c10::StorageImpl* storage, const char* what) {
  const Message message = find(storage);
  TORCH_CHECK(message == nullptr, what, ": ", describe(message), NPU_ERROR_SUFFIX);
}

}  // namespace c10_npu::poison
