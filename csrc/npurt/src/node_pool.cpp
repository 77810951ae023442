// Task node recycler; see node_pool.h.
#include "node_pool.h"

#include <atomic>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define NPU_NODE_POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPU_NODE_POOL_BYPASS 1
#endif
#endif

namespace npurt::internal {
namespace {

#ifndef NPU_NODE_POOL_BYPASS
struct FreeBlock {
  FreeBlock* next;
};

constexpr size_t kBatch = 64;             // blocks per splice onto the global stack
constexpr size_t kMaxPooled = 64 * 1024;  // cap of the global stack (blocks)

// Trivially destructible and constant-initialised: usable during static
// destruction and from thread-exit hooks in any order.
std::atomic<FreeBlock*> gFree{nullptr};
// Approximate number of blocks on gFree (only bounds the pool's size).
std::atomic<size_t> gPooled{0};

void freeChain(FreeBlock* chain) noexcept {
  while (chain != nullptr) {
    FreeBlock* next = chain->next;
    std::free(chain);
    chain = next;
  }
}

// Splices [first, last] onto the global stack, or frees it if the pool is full.
void pushChain(FreeBlock* first, FreeBlock* last, size_t count) noexcept {
  if (first == nullptr) return;
  if (gPooled.load(std::memory_order_relaxed) >= kMaxPooled) {
    freeChain(first);
    return;
  }
  gPooled.fetch_add(count, std::memory_order_relaxed);
  FreeBlock* head = gFree.load(std::memory_order_relaxed);
  do {
    last->next = head;
    // release: the chain's links (written above) are visible to the thread
    // that takes the stack with its acquire exchange.
  } while (!gFree.compare_exchange_weak(head, first, std::memory_order_release,
                                        std::memory_order_relaxed));
}

// Set when this thread's cache has been destroyed (thread exit). Other
// thread-local destructors that run later may still free tasks; they then
// bypass the pool. Trivially destructible, so always safe to read.
thread_local bool tCacheGone = false;

struct ThreadCache {
  FreeBlock* free = nullptr;      // blocks ready for allocate()
  FreeBlock* returned = nullptr;  // batch being built by release()
  FreeBlock* returnedLast = nullptr;
  size_t returnedCount = 0;

  ~ThreadCache() {
    tCacheGone = true;
    pushChain(returned, returnedLast, returnedCount);
    // The free list has no tail pointer; walk it once at thread exit.
    size_t count = 0;
    FreeBlock* last = nullptr;
    for (FreeBlock* b = free; b != nullptr; b = b->next) {
      last = b;
      ++count;
    }
    pushChain(free, last, count);
  }
};

ThreadCache& cache() noexcept {
  static thread_local ThreadCache instance;
  return instance;
}
#endif  // NPU_NODE_POOL_BYPASS

}  // namespace

void* NodePool::allocate() {
#ifndef NPU_NODE_POOL_BYPASS
  if (tCacheGone) [[unlikely]] {
    void* block = std::aligned_alloc(kBlockAlign, kBlockSize);
    if (block == nullptr) throw std::bad_alloc();
    return block;
  }
  ThreadCache& c = cache();
  if (c.free == nullptr) {
    if (c.returned != nullptr) {
      // This thread frees blocks too (e.g. an executor that enqueues): reuse them.
      c.free = c.returned;
      c.returned = c.returnedLast = nullptr;
      c.returnedCount = 0;
    } else if (gFree.load(std::memory_order_relaxed) != nullptr) {
      // acquire: pairs with pushChain's release (the links of the chain).
      c.free = gFree.exchange(nullptr, std::memory_order_acquire);
      gPooled.store(0, std::memory_order_relaxed);
    }
  }
  if (FreeBlock* block = c.free; block != nullptr) {
    c.free = block->next;
    return block;
  }
#endif
  void* block = std::aligned_alloc(kBlockAlign, kBlockSize);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void NodePool::release(void* raw) noexcept {
#ifdef NPU_NODE_POOL_BYPASS
  std::free(raw);
#else
  if (tCacheGone) [[unlikely]] {
    std::free(raw);
    return;
  }
  auto* block = static_cast<FreeBlock*>(raw);
  ThreadCache& c = cache();
  block->next = c.returned;
  if (c.returned == nullptr) c.returnedLast = block;
  c.returned = block;
  if (++c.returnedCount >= kBatch) {
    pushChain(c.returned, c.returnedLast, c.returnedCount);
    c.returned = c.returnedLast = nullptr;
    c.returnedCount = 0;
  }
#endif
}

}  // namespace npurt::internal
