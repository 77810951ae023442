// A stream's task ring and its overflow list. See Note [Task ring] in
// task_queue.h.
#include "task_queue.h"

#include <new>

#include "clock.h"

namespace npurt::internal {
namespace {

// Entries ahead of its own that a producer asks for in exclusive state
// (prefetch for write), 32 lines. An entry's line was last written by the
// consumer (which zeroed it); without the prefetch its ownership transfer
// would be paid by the next enqueue's CAS, which waits for the stores into
// the entry to complete.
constexpr uint64_t kPrefetchAhead = 128;

template <typename T>
uint64_t bits(T* pointer) noexcept {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer));
}

}  // namespace

TaskQueue::TaskQueue(std::atomic<uint64_t>& finished)
    : entries_(new Entry[kInitialCapacity]), capacity_(kInitialCapacity), finished_(finished) {}

TaskQueue::~TaskQueue() {
  // Normally empty: a stream is released only after it drained. After a
  // shutdown race tasks may remain; drop them without running them.
  discardAll();
  freeChain(chain_, true);
  freeChain(overflowHead_, true);
  delete[] entries_.load(std::memory_order_relaxed);
}

bool TaskQueue::encode(const InlineTask& task, Encoded& out) noexcept {
  // Note [Ring entries].
  uint64_t kind = kNode;
  uint64_t payload = 0;
  uint64_t* w = out.words;
  out.span = 1;
  switch (task.kind) {
    case InlineKind::kHostFn:
      kind = kHostFn;
      payload = bits(task.hostFn.fn);
      w[1] = bits(task.hostFn.userData);
      break;
    case InlineKind::kUserTask: {
      w[1] = bits(task.user.userData);
      const uint32_t index =
          TaskDescriptors::intern(task.user.name, task.user.run, task.user.release);
      if (index != TaskDescriptors::kNone) [[likely]] {
        kind = kInterned;
        payload = index;
        break;
      }
      kind = kUserTask;
      payload = bits(task.user.run);
      w[2] = bits(task.user.release);
      w[3] = bits(task.user.name);
      out.span = 2;
      break;
    }
    case InlineKind::kNode:
      w[1] = bits(task.node);
      break;
  }
  if ((payload & ~kPayloadMask) != 0) [[unlikely]]
    return false;
  w[0] = payload | kind << kKindShift;
  if (task.enqueueNs != 0) {
    w[0] |= kTimestamped;
    w[2 * out.span] = task.enqueueNs;
    w[2 * out.span + 1] = task.externalId;
    ++out.span;
  }
  return true;
}

TaskQueue::Pushed TaskQueue::push(const InlineTask& task) {
  Encoded encoded;
  if (!encode(task, encoded)) [[unlikely]] {
    // A code pointer with high bits set: enqueue the task as a node.
    TaskPtr node = makeTask<InlineTaskNode>(task);
    InlineTask heap = InlineTask::heap(node.get());
    heap.enqueueNs = task.enqueueNs;
    heap.externalId = task.externalId;
    const Pushed pushed = push(heap);
    (void)node.release();  // the queue owns it now
    return pushed;
  }
  const uint64_t span = encoded.span;
  uint64_t word = tail_.load(std::memory_order_relaxed);
  uint64_t ticket = 0;
  for (;;) {
    if ((word & kOverflowBit) != 0) [[unlikely]]
      return pushOverflow(task, span);
    ticket = word & kCountMask;
    // acquire (both loads): the consumer zeroed and left the entries we are
    // about to reuse before it published a finished count past them; the
    // cached copy carries that through the release store below.
    const uint64_t capacity = this->capacity();
    if (ticket + span - cachedFinished_.load(std::memory_order_acquire) > capacity) [[unlikely]] {
      const uint64_t finished = finished_.load(std::memory_order_acquire);
      cachedFinished_.store(finished, std::memory_order_release);
      if (ticket + span - finished > capacity) return pushOverflow(task, span);
    }
    // The new word has the count advanced and kIdleBit cleared. acq_rel:
    // acquire pairs with tryRelease's release, so a producer that takes over
    // an idle stream hands the last owner's state (head_) to the next one;
    // release orders our earlier cachedFinished_ reads before the ticket.
    if (tail_.compare_exchange_weak(word, ticket + span, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
      break;
    }
  }
  // The ring cannot change between our ticket and its publication (Note
  // [Task ring], Overflow); both addresses are used before the publication.
  Entry* const ring = entries_.load(std::memory_order_relaxed);
  const uint64_t mask = capacity() - 1;
  // Later entries first (relaxed: the first tag's release publishes them).
  for (uint64_t i = 1; i < span; ++i) {
    Entry& entry = ring[(ticket + i) & mask];
    entry.tag.store(encoded.words[2 * i], std::memory_order_relaxed);
    entry.word = encoded.words[2 * i + 1];
  }
  Entry& first = ring[ticket & mask];
  first.word = encoded.words[1];
  prefetchForWrite(&ring[(ticket + kPrefetchAhead) & mask]);
  // release: the consumer's acquire load of the tag sees the whole task.
  first.tag.store(encoded.words[0], std::memory_order_release);
  return {ticket, (word & kIdleBit) != 0};
}

TaskQueue::Pushed TaskQueue::pushOverflow(const InlineTask& task, uint64_t span) {
  // Allocated before a ticket is taken: if this throws, nothing changed.
  OverflowNode* node = makePooled<OverflowNode>(task, span, nullptr);
  std::unique_lock<std::mutex> lock(overflowMutex_);
  uint64_t word = tail_.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t ticket = word & kCountMask;
    const bool starting = (word & kOverflowBit) == 0;
    if (starting && ticket + span - finished_.load(std::memory_order_acquire) <= capacity()) {
      // The consumer made room (or left overflow mode) since we looked.
      lock.unlock();
      releasePooled(node);
      return push(task);
    }
    // Only mutex holders change the word while kOverflowBit is set; before
    // it is set a fast-path producer may still win a ticket, hence the CAS.
    // acq_rel as in push().
    if (tail_.compare_exchange_weak(word, (ticket + span) | kOverflowBit, std::memory_order_acq_rel,
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
  uint64_t span = frontSpan_;
  if (OverflowNode* node = chain_; node != nullptr) {
    span = node->span;
    chain_ = node->next;
    releasePooled(node);
  } else {
    // Free the entries for the next lap (Note [Task ring], Entry reuse).
    // relaxed: the release store of the count below publishes the zeros.
    for (uint64_t i = 0; i < span; ++i) entryAt(head_ + i).tag.store(0, std::memory_order_relaxed);
  }
  head_ += span;
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
  Entry* larger = new (std::nothrow) Entry[capacity * kGrowth];
  if (larger == nullptr) return;
  delete[] entries_.exchange(larger, std::memory_order_relaxed);
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
    releasePooled(node);
    node = next;
  }
}

}  // namespace npurt::internal
