// TaskQueue: a stream's multi-producer, single-consumer FIFO of tasks.
//
// Note [Task ring]
// ~~~~~~~~~~~~~~~~
// Hot path. Every task gets a ticket t = 0, 1, 2, ... (its position in the
// stream) and lives in slot t % capacity of a ring allocated with the
// stream (kInitialCapacity slots, grown on overflow, see below). One word,
// tail_, holds the number of tickets handed out plus two flags:
//  - kIdleBit: no executor owns the stream. The producer whose CAS takes a
//    ticket from a word with the bit set clears it and schedules the stream
//    (Stream::enqueue); the owner sets it again, with a CAS that fails if a
//    ticket was taken meanwhile (tryRelease), so ownership changes hands in
//    the same atomic operation that orders tickets: no Dekker pair, and no
//    second atomic operation on the producer's path.
//  - kOverflowBit: the ring was full; tickets are then handed out under
//    overflowMutex_ and their tasks go to a linked overflow list instead
//    (never blocking the producer, which may be a task on the very executor
//    that has to drain the ring). See "Overflow" below.
// Enqueue: one CAS on tail_ (a CAS rather than fetch_add, so that the flags
// are seen and changed in the same operation), copy the 48-byte InlineTask
// into the slot, then publish it by storing seq = t + 1 (release). The slot
// is one cache line; nothing is allocated.
//
// Publication is out of order between producers (ticket t+1 may be
// published before t), so the consumer takes tasks strictly by ticket: slot
// `head_` is ready when its seq is head_ + 1. If it is not, poll() looks at
// tail_: no more tickets means empty; otherwise a producer holds ticket
// head_ and is a few instructions from publishing it (kPending), or the task
// is in the overflow list. The owner calls poll() sparingly (Note [Consumer
// distance] in executor.h).
//
// Slot reuse: the consumer never writes a slot, so a slot line only moves
// from producer to consumer. A producer may reuse slot t % capacity once
// ticket t - capacity has *finished* (the stream's finished count, which
// the consumer publishes after every task with release, is past it); the
// consumer copies a task out of its slot before running it. Producers keep
// a copy of the finished count on their own line (cachedFinished_) and read
// the consumer's line only when that copy says the ring is full, i.e. once
// per lap at most.
//
// Overflow: a producer that finds the ring full (the count re-read) takes
// overflowMutex_, sets kOverflowBit with the next ticket F (overflowStart_)
// and appends its task to the overflow list. While the bit is set every
// producer does the same, so the list holds tickets F, F+1, ... in order and
// tail_ changes only under the mutex. The consumer drains the ring up to F,
// then takes the whole list at once (chain_, every ticket up to the count)
// and clears the bit in the same critical section: the ring is used again
// from the current count (seq values never repeat, so slots need no reset),
// and those tickets come after the chain's. Overflow happens when the owner
// falls a whole ring behind, e.g. while a sleeping worker wakes up. At that
// point no live task is in the ring (every ticket before the overflow was
// taken) and no producer can be writing it (producers write a slot only
// between their ticket and its publication), so the consumer replaces the
// ring with one kGrowth times larger, up to kMaxCapacity: a stream that is
// fed faster than it drains gets a deep ring, an ordinary one stays small.
// Producers read the ring after their CAS, which acquires the word the
// consumer released after the swap.
//
// Thread safety: push() and enqueued() from any thread. The consumer
// functions (marked) only from the stream's current owner (Note [Stream
// ownership] in stream.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "task.h"

namespace npurt::internal {

class TaskQueue {
 public:
  // Ring slots (64 bytes each), powers of two: 16 KiB at first, at most
  // 1 MiB for a stream that overflowed repeatedly.
  static constexpr uint64_t kInitialCapacity = 256;
  static constexpr uint64_t kMaxCapacity = 16384;
  static constexpr uint64_t kGrowth = 4;
  static constexpr uint64_t kIdleBit = uint64_t{1} << 63;
  static constexpr uint64_t kOverflowBit = uint64_t{1} << 62;
  static constexpr uint64_t kCountMask = kOverflowBit - 1;

  // `finished` is the stream's count of finished tasks (StreamProgress),
  // written by the consumer through pop(). Allocates the ring; throws
  // std::bad_alloc.
  explicit TaskQueue(std::atomic<uint64_t>& finished);
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;
  // Discards (without running) whatever is still queued.
  ~TaskQueue();

  struct Pushed {
    uint64_t ticket;  // the task's position in the stream
    bool wasIdle;     // the caller took ownership and must schedule the stream
  };
  // Appends a task. Thread-safe. Throws std::bad_alloc only if the ring is
  // full and no overflow node can be allocated; nothing is enqueued then.
  Pushed push(const InlineTask& task);

  // Tickets handed out so far: every task ever enqueued. Thread-safe.
  // acquire: pairs with the tail CAS, for callers that go on to read the
  // finished count (Stream::idle).
  uint64_t enqueued() const noexcept { return tail_.load(std::memory_order_acquire) & kCountMask; }

  // --- Consumer (owner only) ---
  enum class Front {
    kReady,     // `out` holds the task with ticket head()
    kNotReady,  // front() only: nothing published at head() (poll() says why)
    kPending,   // ticket head() is taken but not published yet: retry soon
    kEmpty,     // no ticket beyond head(): every enqueued task has finished
  };
  // Hot path. Looks at the oldest task without removing it (an event wait
  // that parks the stream stays at the front). Reads only the slot (or the
  // taken overflow chain), never the producers' tail word: kReady or
  // kNotReady.
  Front front(InlineTask& out) noexcept {
    if (chain_ != nullptr) {
      out = chain_->task;
      return Front::kReady;
    }
    const Slot& slot = slotAt(head_);
    // acquire: pairs with push()'s release of seq (the task's fields).
    if (slot.seq.load(std::memory_order_acquire) != head_ + 1) return Front::kNotReady;
    out = slot.task;
    return Front::kReady;
  }
  // front(), and if nothing is published, a look at the tail word: kReady
  // (possibly from the overflow list), kPending or kEmpty. Reading the tail
  // word takes the producers' cache line away from them, so the owner calls
  // this only when front() has come up empty for a while, or when it must
  // know (idle waiters, releasing the stream).
  Front poll(InlineTask& out) noexcept;
  // Removes the task front() returned and publishes the new finished count
  // (release: the task's effects, and its slot being free, become visible
  // to whoever reads the count).
  void pop() noexcept;
  // Gives the stream up (sets kIdleBit) if no ticket was taken beyond
  // head(); returns false, keeping ownership, if one was.
  bool tryRelease() noexcept;
  uint64_t head() const noexcept { return head_; }

  // Shutdown (the executors are joined, this thread is the only consumer):
  // discards every published task in order, calling release. Stops at a task
  // whose producer is still half-way through push() (a racing call at exit).
  void discardAll() noexcept;

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> seq{0};  // t + 1 once ticket t is published here
    InlineTask task;
  };
  static_assert(sizeof(Slot) == 64, "one slot per cache line");

  struct OverflowNode {
    InlineTask task;
    OverflowNode* next;
  };

  // The slot of `ticket` in the current ring. relaxed: the ring changes
  // only while no producer may touch it, and the tail word orders the
  // change (see Overflow in Note [Task ring]).
  Slot& slotAt(uint64_t ticket) const noexcept {
    return slots_.load(std::memory_order_relaxed)[ticket & (capacity() - 1)];
  }
  uint64_t capacity() const noexcept { return capacity_.load(std::memory_order_relaxed); }
  Pushed pushOverflow(const InlineTask& task);
  // Replaces the (empty) ring by a larger one; owner, under overflowMutex_.
  void grow() noexcept;
  void freeChain(OverflowNode* node, bool discard) noexcept;

  // Four cache lines, so that no line is written by one side and read by
  // the other on every task.
  // Producers' line: written by every enqueue.
  alignas(64) std::atomic<uint64_t> tail_{kIdleBit};  // ticket count | flags
  std::atomic<uint64_t> cachedFinished_{0};           // a recent finished count
  // Read by both sides on every task, written only when the ring grows.
  alignas(64) std::atomic<Slot*> slots_;  // the ring (owned)
  std::atomic<uint64_t> capacity_{0};     // its number of slots
  std::atomic<uint64_t>& finished_;       // the stream's finished count (its own line)
  // Consumer's line.
  alignas(64) uint64_t head_ = 0;  // owner: next ticket to take
  OverflowNode* chain_ = nullptr;  // owner: overflow tasks taken from the list

  alignas(64) std::mutex overflowMutex_;  // guards the three below
  OverflowNode* overflowHead_ = nullptr;  // tickets overflowStart_, ... in order
  OverflowNode** overflowTail_ = &overflowHead_;
  uint64_t overflowStart_ = 0;  // first ticket of the current overflow
};

}  // namespace npurt::internal
