// A stream's task ring and its overflow list. See Note [Task ring] in
// task_queue.h.
#include "task_queue.h"

#include <new>

#include "clock.h"

namespace npurt::internal {
namespace {

// Slots ahead of its own that a producer asks for in exclusive state
// (prefetch for write). A slot line was last read by the consumer; without
// the prefetch its ownership transfer would be paid by the next enqueue's
// CAS, which waits for the store into the slot to complete.
constexpr uint64_t kPrefetchAhead = 32;

}  // namespace

TaskQueue::TaskQueue(std::atomic<uint64_t>& finished)
    : slots_(new Slot[kInitialCapacity]), capacity_(kInitialCapacity), finished_(finished) {}

TaskQueue::~TaskQueue() {
  // Normally empty: a stream is released only after it drained. After a
  // shutdown race tasks may remain; drop them without running them.
  discardAll();
  freeChain(chain_, true);
  freeChain(overflowHead_, true);
  delete[] slots_.load(std::memory_order_relaxed);
}

TaskQueue::Pushed TaskQueue::push(const InlineTask& task) {
  uint64_t word = tail_.load(std::memory_order_relaxed);
  uint64_t ticket = 0;
  for (;;) {
    if ((word & kOverflowBit) != 0) [[unlikely]]
      return pushOverflow(task);
    ticket = word & kCountMask;
    // acquire (both loads): the consumer copied the task out of the slot we
    // are about to reuse before it published a finished count past it; the
    // cached copy carries that through the release store below.
    const uint64_t capacity = this->capacity();
    if (ticket - cachedFinished_.load(std::memory_order_acquire) >= capacity) [[unlikely]] {
      const uint64_t finished = finished_.load(std::memory_order_acquire);
      cachedFinished_.store(finished, std::memory_order_release);
      if (ticket - finished >= capacity) return pushOverflow(task);
    }
    // The new word has the count advanced and kIdleBit cleared. acq_rel:
    // acquire pairs with tryRelease's release, so a producer that takes over
    // an idle stream hands the last owner's state (head_) to the next one;
    // release orders our earlier cachedFinished_ reads before the ticket.
    if (tail_.compare_exchange_weak(word, ticket + 1, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
      break;
    }
  }
  // The ring cannot change between our ticket and its publication (Note
  // [Task ring], Overflow); both addresses are used before the publication.
  Slot* const ring = slots_.load(std::memory_order_relaxed);
  const uint64_t mask = capacity() - 1;
  Slot& slot = ring[ticket & mask];
  slot.task = task;
  prefetchForWrite(&ring[(ticket + kPrefetchAhead) & mask]);
  // release: the consumer's acquire load of seq sees the whole task.
  slot.seq.store(ticket + 1, std::memory_order_release);
  return {ticket, (word & kIdleBit) != 0};
}

TaskQueue::Pushed TaskQueue::pushOverflow(const InlineTask& task) {
  // Allocated before a ticket is taken: if this throws, nothing changed.
  auto* node = ::new (NodePool::allocate()) OverflowNode{task, nullptr};
  std::unique_lock<std::mutex> lock(overflowMutex_);
  uint64_t word = tail_.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t ticket = word & kCountMask;
    const bool starting = (word & kOverflowBit) == 0;
    if (starting && ticket - finished_.load(std::memory_order_acquire) < capacity()) {
      // The consumer made room (or left overflow mode) since we looked.
      lock.unlock();
      node->~OverflowNode();
      NodePool::release(node);
      return push(task);
    }
    // Only mutex holders change the word while kOverflowBit is set; before
    // it is set a fast-path producer may still win a ticket, hence the CAS.
    // acq_rel as in push().
    if (tail_.compare_exchange_weak(word, (ticket + 1) | kOverflowBit, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
      if (starting) overflowStart_ = ticket;
      *overflowTail_ = node;
      overflowTail_ = &node->next;
      // A full ring means unfinished work, whose owner cannot have set
      // kIdleBit; reported anyway for robustness.
      return {ticket, (word & kIdleBit) != 0};
    }
  }
}

TaskQueue::Front TaskQueue::poll(InlineTask& out) noexcept {
  if (front(out) == Front::kReady) return Front::kReady;
  const uint64_t word = tail_.load(std::memory_order_acquire);
  if ((word & kCountMask) == head_) return Front::kEmpty;
  if ((word & kOverflowBit) != 0) {
    std::lock_guard<std::mutex> lock(overflowMutex_);
    if (head_ >= overflowStart_ && overflowHead_ != nullptr) {
      // The ring is drained up to the overflow: take the whole list, which
      // holds every ticket from head_ up to the count, and leave overflow
      // mode at once, so that producers go back to the ring (a producer
      // that finds it full again starts a new overflow). New ring tickets
      // come after the chain's, and the chain is taken first. Only mutex
      // holders change the word while the bit is set, so a store will do;
      // release pairs with the producers' CAS (acquire) as in tryRelease.
      chain_ = overflowHead_;
      overflowHead_ = nullptr;
      overflowTail_ = &overflowHead_;
      grow();
      tail_.store(tail_.load(std::memory_order_relaxed) & ~kOverflowBit, std::memory_order_release);
    }
  }
  if (chain_ != nullptr) {
    out = chain_->task;
    return Front::kReady;
  }
  return Front::kPending;
}

void TaskQueue::pop() noexcept {
  if (OverflowNode* node = chain_; node != nullptr) {
    chain_ = node->next;
    node->~OverflowNode();
    NodePool::release(node);
  }
  ++head_;
  // release: see the declaration. A plain store on x86; the finished count
  // has a line of its own, read by queries and rarely by producers.
  finished_.store(head_, std::memory_order_release);
}

bool TaskQueue::tryRelease() noexcept {
  uint64_t word = tail_.load(std::memory_order_relaxed);
  for (;;) {
    if ((word & kCountMask) != head_ || chain_ != nullptr) return false;  // work arrived
    if ((word & kOverflowBit) != 0) {
      // Everything, overflow included, has been taken: leave overflow mode
      // so that producers use the ring again. Under the mutex, which every
      // producer holds while the bit is set.
      std::lock_guard<std::mutex> lock(overflowMutex_);
      word = tail_.load(std::memory_order_relaxed);
      if ((word & kCountMask) != head_ || overflowHead_ != nullptr) return false;
      tail_.store(word & ~kOverflowBit, std::memory_order_release);
      word &= ~kOverflowBit;
    }
    // release: hands head_ and the queue state to the producer that clears
    // the bit (its CAS acquires) and through the executor to the next owner.
    if (tail_.compare_exchange_weak(word, word | kIdleBit, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return true;
    }
  }
}

void TaskQueue::grow() noexcept {
  const uint64_t capacity = this->capacity();
  if (capacity >= kMaxCapacity) return;
  // Not worth failing over: without memory the stream keeps its ring.
  Slot* larger = new (std::nothrow) Slot[capacity * kGrowth];
  if (larger == nullptr) return;
  delete[] slots_.exchange(larger, std::memory_order_relaxed);
  capacity_.store(capacity * kGrowth, std::memory_order_relaxed);
}

void TaskQueue::discardAll() noexcept {
  InlineTask task;
  while (poll(task) == Front::kReady) {
    task.discard();
    task.dispose();
    pop();
  }
}

void TaskQueue::freeChain(OverflowNode* node, bool discard) noexcept {
  while (node != nullptr) {
    OverflowNode* next = node->next;
    if (discard) {
      node->task.discard();
      node->task.dispose();
    }
    node->~OverflowNode();
    NodePool::release(node);
    node = next;
  }
}

}  // namespace npurt::internal
