// Recycler of cross-thread blocks; see node_pool.h.
#include "node_pool.h"

#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <limits>

#if defined(__SANITIZE_ADDRESS__)
#define NPU_NODE_POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPU_NODE_POOL_BYPASS 1
#endif
#endif

namespace npurt::internal {
namespace {

void* alignedBlock(size_t size) {
  // Rounding below must not wrap (npuTaskDataAlloc takes any size).
  if (size > std::numeric_limits<size_t>::max() - NodePool::kBlockAlign) throw std::bad_alloc();
  // aligned_alloc wants a multiple of the alignment.
  const size_t rounded = (size + NodePool::kBlockAlign - 1) & ~(NodePool::kBlockAlign - 1);
  void* block = std::aligned_alloc(NodePool::kBlockAlign, rounded);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

#ifndef NPU_NODE_POOL_BYPASS
struct FreeBlock {
  FreeBlock* next;
};

constexpr size_t kMinClassSize = 64;
constexpr size_t kClasses = 7;                // 64, 128, ..., 4096 bytes
constexpr size_t kBatch = 64;                 // blocks per splice onto a global stack
constexpr size_t kMaxPooledBytes = 8u << 20;  // cap of each global stack
static_assert(kMinClassSize << (kClasses - 1) == NodePool::kMaxPooledSize);

constexpr size_t classSize(size_t c) { return kMinClassSize << c; }

// The class whose blocks hold `size` bytes; kClasses if none does.
size_t classOf(size_t size) noexcept {
  if (size <= kMinClassSize) return 0;
  if (size > NodePool::kMaxPooledSize) return kClasses;
  return std::bit_width(size - 1) - std::bit_width(kMinClassSize - 1);
}

// One global stack per class. Trivially destructible and constant-
// initialised: usable during static destruction and from thread-exit hooks
// in any order.
struct GlobalStack {
  std::atomic<FreeBlock*> head{nullptr};
  // Approximate number of blocks on head (only bounds the pool's size).
  std::atomic<size_t> pooled{0};
};
std::array<GlobalStack, kClasses> gStacks;

void freeChain(FreeBlock* chain) noexcept {
  while (chain != nullptr) {
    FreeBlock* next = chain->next;
    std::free(chain);
    chain = next;
  }
}

// Splices [first, last] onto class c's stack, or frees it if that is full.
void pushChain(size_t c, FreeBlock* first, FreeBlock* last, size_t count) noexcept {
  if (first == nullptr) return;
  GlobalStack& g = gStacks[c];
  if (g.pooled.load(std::memory_order_relaxed) * classSize(c) >= kMaxPooledBytes) {
    freeChain(first);
    return;
  }
  g.pooled.fetch_add(count, std::memory_order_relaxed);
  FreeBlock* head = g.head.load(std::memory_order_relaxed);
  do {
    last->next = head;
    // release: the chain's links (written above) are visible to the thread
    // that takes the stack with its acquire exchange.
  } while (!g.head.compare_exchange_weak(head, first, std::memory_order_release,
                                         std::memory_order_relaxed));
}

// Set when this thread's cache has been destroyed (thread exit). Other
// thread-local destructors that run later may still free tasks; they then
// bypass the pool. Trivially destructible, so always safe to read.
thread_local bool tCacheGone = false;

// Note [The next block is fetched ahead]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A block that allocate() hands out was usually freed by another thread (an
// executor releasing a task), so its cache lines sit modified in that
// thread's core, and the allocating thread's first writes each wait for a
// line to come over: for a 1 KiB op task, sixteen of them on every tiny op.
// So allocate() asks for the lines of the block after the one it returns,
// for writing, while that block waits in the cache: by the next allocation
// (microseconds later) they are here. A hint only: it never faults and
// changes nothing the program can observe. Measured in docs/PERFORMANCE.md
// (session 25).
inline void prefetchForWrite(const void* block, size_t bytes) noexcept {
  const char* p = static_cast<const char*>(block);
  for (size_t offset = 0; offset < bytes; offset += NodePool::kBlockAlign) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" ::"m"(*(p + offset)));  // a no-op on CPUs without it
#else
    __builtin_prefetch(p + offset, /*rw=*/1, /*locality=*/3);
#endif
  }
}

struct ClassCache {
  FreeBlock* free = nullptr;      // blocks ready for allocate()
  FreeBlock* returned = nullptr;  // batch being built by release()
  FreeBlock* returnedLast = nullptr;
  size_t returnedCount = 0;

  FreeBlock* pop(size_t c) noexcept {
    if (free == nullptr) {
      if (returned != nullptr) {
        // This thread frees blocks too (e.g. an executor that enqueues): reuse them.
        free = returned;
        returned = returnedLast = nullptr;
        returnedCount = 0;
      } else if (gStacks[c].head.load(std::memory_order_relaxed) != nullptr) {
        // acquire: pairs with pushChain's release (the links of the chain).
        free = gStacks[c].head.exchange(nullptr, std::memory_order_acquire);
        gStacks[c].pooled.store(0, std::memory_order_relaxed);
      }
    }
    FreeBlock* block = free;
    if (block != nullptr) {
      free = block->next;
      // Note [The next block is fetched ahead]
      if (free != nullptr) prefetchForWrite(free, classSize(c));
    }
    return block;
  }

  void push(size_t c, FreeBlock* block) noexcept {
    block->next = returned;
    if (returned == nullptr) returnedLast = block;
    returned = block;
    if (++returnedCount >= kBatch) {
      pushChain(c, returned, returnedLast, returnedCount);
      returned = returnedLast = nullptr;
      returnedCount = 0;
    }
  }

  void flush(size_t c) noexcept {
    pushChain(c, returned, returnedLast, returnedCount);
    // The free list has no tail pointer; walk it once at thread exit.
    size_t count = 0;
    FreeBlock* last = nullptr;
    for (FreeBlock* b = free; b != nullptr; b = b->next) {
      last = b;
      ++count;
    }
    pushChain(c, free, last, count);
  }
};

struct ThreadCache {
  std::array<ClassCache, kClasses> classes;

  ~ThreadCache() {
    tCacheGone = true;
    for (size_t c = 0; c < kClasses; ++c) classes[c].flush(c);
  }
};

ThreadCache& cache() noexcept {
  static thread_local ThreadCache instance;
  return instance;
}
#endif  // NPU_NODE_POOL_BYPASS

}  // namespace

void* NodePool::allocate(size_t size) {
#ifndef NPU_NODE_POOL_BYPASS
  const size_t c = classOf(size);
  if (c == kClasses) return alignedBlock(size);
  if (!tCacheGone) [[likely]] {
    if (FreeBlock* block = cache().classes[c].pop(c)) return block;
  }
  return alignedBlock(classSize(c));
#else
  return alignedBlock(size);
#endif
}

void NodePool::release(void* raw, size_t size) noexcept {
#ifndef NPU_NODE_POOL_BYPASS
  const size_t c = classOf(size);
  if (c == kClasses || tCacheGone) [[unlikely]] {
    std::free(raw);
    return;
  }
  cache().classes[c].push(c, static_cast<FreeBlock*>(raw));
#else
  (void)size;
  std::free(raw);
#endif
}

}  // namespace npurt::internal
