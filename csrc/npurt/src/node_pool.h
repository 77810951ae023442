// Recycler for memory that one thread allocates and another frees: npurt's
// task nodes, and the userData of tasks (npuTaskDataAlloc).
//
// Why: a stream's tasks are allocated by producer threads and freed by
// executor threads. With glibc's malloc that cross-thread pattern defeats the
// per-thread caches: every allocation takes the arena's locked slow path on
// the producer, every free the same on the executor, and the two threads
// contend for the arena's lock (in profiles of the enqueue benchmark
// malloc/free took about half of the time; for a small op on the npu device,
// a third of the host thread's time went to waking the executor blocked on
// that lock). Here blocks come in size classes (64 bytes to kMaxPooledSize,
// powers of two), and a freed block goes back through a per-thread cache and
// a global lock-free stack of its class:
//  - allocate() pops from the calling thread's cache; when that is empty it
//    takes the *whole* global stack with one exchange (no ABA: nothing is
//    read through a node another thread may own), else falls back to
//    std::aligned_alloc.
//  - release() pushes onto the calling thread's return batch; a full batch
//    (kBatch blocks) is spliced onto the global stack with one CAS (a push of
//    a privately owned chain is ABA-free too). So an executor pays one atomic
//    operation per kBatch tasks, a producer one per refill.
//  - Each class keeps at most about 8 MiB of blocks; beyond that, batches are
//    freed. A thread's cache is flushed to the global stacks when the thread
//    exits.
// Sizes above kMaxPooledSize are plain aligned allocations. Under
// AddressSanitizer the pool is bypassed (every block is malloc'd and freed),
// so use-after-free of a task is still caught.
//
// Thread safety: allocate() and release() are thread-safe and lock-free.
// Blocks may be released on any thread.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace npurt::internal {

class NodePool {
 public:
  static constexpr size_t kBlockSize = 128;  // npurt's task nodes
  static constexpr size_t kBlockAlign = 64;
  static constexpr size_t kMaxPooledSize = 4096;

  // A block of at least `size` bytes aligned to kBlockAlign. Throws
  // std::bad_alloc.
  static void* allocate(size_t size = kBlockSize);
  // Returns a block from allocate(size), with the same size. Never fails.
  static void release(void* block, size_t size = kBlockSize) noexcept;
};

// Constructs a T in a pool block. T must fit (static_assert).
template <typename T, typename... Args>
T* makePooled(Args&&... args) {
  static_assert(sizeof(T) <= NodePool::kBlockSize, "task type too large for a pool block");
  static_assert(alignof(T) <= NodePool::kBlockAlign, "task type over-aligned for a pool block");
  void* block = NodePool::allocate();
  try {
    // Aggregates (e.g. TaskQueue::OverflowNode) with braces: parenthesised
    // aggregate initialisation is C++20 that clang < 16 lacks (the fuzz
    // build uses clang).
    if constexpr (std::is_aggregate_v<T>) {
      return ::new (block) T{std::forward<Args>(args)...};
    } else {
      return ::new (block) T(std::forward<Args>(args)...);
    }
  } catch (...) {
    NodePool::release(block);
    throw;
  }
}

// Destroys a T made by makePooled and returns its block to the pool.
template <typename T>
void releasePooled(T* object) noexcept {
  object->~T();
  NodePool::release(object);
}

}  // namespace npurt::internal
