// TaskQueue: a stream's multi-producer, single-consumer FIFO of tasks.
//
// Note [Task ring]
// ~~~~~~~~~~~~~~~~
// Hot path. The queue is a ring of 16-byte entries allocated with the
// stream (kInitialCapacity entries, grown on overflow, see below). A task
// takes one to three consecutive entries (Note [Ring entries]), and its
// ticket is the position of its first entry in the stream: tickets, the
// finished count and the head all count entries, and advance by a task's
// span. One word, tail_, holds the number of entries handed out plus two
// flags:
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
// are seen and changed in the same operation) that advances it by the
// task's span, then write the entries and publish the task by storing its
// first entry's tag word last (release). Nothing is allocated.
//
// Why 16-byte entries: on a machine whose consumer drains while producers
// enqueue, the producer's cost is set by the cache lines it has to take
// back from the consumer, not by its instructions. The lock-prefixed CAS
// waits for the previous task's stores, and so for the line they went to;
// measured on the 2-vCPU development VM, one line per task cost 25-40 ns an
// enqueue and a quarter of a line 11-13 ns (docs/PERFORMANCE.md). Four host
// functions share a line; a user task takes half of one.
//
// Publication is out of order between producers (ticket t+2 may be
// published before t), so the consumer takes tasks strictly by ticket: the
// task at `head_` is ready when its first tag word is non-zero. If it is
// not, poll() looks at tail_: no more tickets means empty; otherwise a
// producer holds ticket head_ and is a few instructions from publishing it
// (kPending), or the task is in the overflow list. The owner calls poll()
// sparingly (Note [Consumer distance] in executor.h).
//
// Entry reuse: a producer may write an entry once every task that used it
// before has *finished*, i.e. the stream's finished count (which the
// consumer publishes after every task with release) is past it. The
// consumer copies a task out of its entries before running it and zeroes
// their tag words when it pops it, before publishing the count; so a zero
// tag word means "not published yet" in every lap, without a lap number.
// Producers keep a copy of the finished count on their own line
// (cachedFinished_) and read the consumer's line only when that copy says
// the ring is full, i.e. once per lap at most.
//
// Overflow: a producer that finds the ring full (the count re-read) takes
// overflowMutex_, sets kOverflowBit with the next ticket F (overflowStart_)
// and appends its task, with its span, to the overflow list. While the bit
// is set every producer does the same, so the list holds the tasks from
// ticket F on, in order, and tail_ changes only under the mutex. The
// consumer drains the ring up to F, then takes the whole list at once
// (chain_, every ticket up to the count) and clears the bit in the same
// critical section: the ring is used again from the current count (every
// entry of the ring is zero by then), and those tickets come after the
// chain's. Overflow happens when the owner falls a whole ring behind, e.g.
// while a sleeping worker wakes up. At that point no live task is in the
// ring (every ticket before the overflow was taken) and no producer can be
// writing it (producers write entries only between their ticket and its
// publication), so the consumer replaces the ring with one kGrowth times
// larger, up to kMaxCapacity: a stream that is fed faster than it drains
// gets a deep ring, an ordinary one stays small. Producers read the ring
// after their CAS, which acquires the word the consumer released after the
// swap.
//
// Note [Ring entries]
// ~~~~~~~~~~~~~~~~~~~
// An entry is two words: `tag` (atomic, the publication word of a task's
// first entry) and `word`. A task's first entry holds
//   tag  = payload | kind << kKindShift | kTimestamped if traced
//   word = the task's userData, or its Task* for a node task,
// where, by kind (EntryKind, never zero, so neither is a published tag):
//  - kHostFn: payload = the host function;
//  - kInterned: payload = the index of the user task's (name, run,
//    release) in TaskDescriptors (Note [Task descriptors]);
//  - kUserTask: a user task that could not be interned. payload = its run
//    function, and a second entry holds tag = release, word = name;
//  - kNode: payload = 0.
// A task enqueued while the trace or the activity log was on adds a last
// entry (tag = its enqueue time, word = its external correlation id). Code pointers live in the low 56 bits on every platform we
// build for (user-space text, never tagged); a task whose pointer does not
// is enqueued as a node task instead (InlineTaskNode), so the encoding
// never loses information.
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
#include "task_descriptors.h"

namespace npurt::internal {

class TaskQueue {
 public:
  // Ring entries (16 bytes each), powers of two: 16 KiB at first, at most
  // 1 MiB for a stream that overflowed repeatedly.
  static constexpr uint64_t kInitialCapacity = 1024;
  static constexpr uint64_t kMaxCapacity = 65536;
  static constexpr uint64_t kGrowth = 4;
  // Entries of the largest task (Note [Ring entries]).
  static constexpr uint64_t kMaxSpan = 3;
  static constexpr uint64_t kIdleBit = uint64_t{1} << 63;
  static constexpr uint64_t kOverflowBit = uint64_t{1} << 62;
  static constexpr uint64_t kCountMask = kOverflowBit - 1;

  // `finished` is the stream's count of finished entries (StreamProgress),
  // written by the consumer through pop(). Allocates the ring; throws
  // std::bad_alloc.
  explicit TaskQueue(std::atomic<uint64_t>& finished);
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;
  // Discards (without running) whatever is still queued.
  ~TaskQueue();

  struct Pushed {
    uint64_t ticket;  // the task's position in the stream (its first entry)
    bool wasIdle;     // the caller took ownership and must schedule the stream
  };
  // Appends a task. Thread-safe. Throws std::bad_alloc only if a node is
  // needed (the ring is full, or the task cannot be encoded, see Note [Ring
  // entries]) and cannot be allocated; nothing is enqueued then.
  Pushed push(const InlineTask& task);

  // Entries handed out so far: the end of every task ever enqueued.
  // Thread-safe. acquire: pairs with the tail CAS, for callers that go on
  // to read the finished count (Stream::idle).
  uint64_t enqueued() const noexcept { return tail_.load(std::memory_order_acquire) & kCountMask; }

  // --- Consumer (owner only) ---
  enum class Front {
    kReady,     // `out` holds the task with ticket head()
    kNotReady,  // front() only: nothing published at head() (poll() says why)
    kPending,   // ticket head() is taken but not published yet: retry soon
    kEmpty,     // no ticket beyond head(): every enqueued task has finished
  };
  // Hot path. Looks at the oldest task without removing it (an event wait
  // that parks the stream stays at the front). Reads only the ring (or the
  // taken overflow chain), never the producers' tail word: kReady or
  // kNotReady.
  Front front(InlineTask& out) noexcept {
    if (chain_ != nullptr) {
      out = chain_->task;
      return Front::kReady;
    }
    // acquire: pairs with push()'s release of the tag (the other words).
    const uint64_t tag = entryAt(head_).tag.load(std::memory_order_acquire);
    if (tag == 0) return Front::kNotReady;
    frontSpan_ = decode(tag, out);
    return Front::kReady;
  }
  // front(), and if nothing is published, a look at the tail word: kReady
  // (possibly from the overflow list), kPending or kEmpty. Reading the tail
  // word takes the producers' cache line away from them, so the owner calls
  // this only when front() has come up empty for a while, or when it must
  // know (idle waiters, releasing the stream).
  Front poll(InlineTask& out) noexcept;
  // Removes the task front() returned and publishes the new finished count
  // (release: the task's effects, and its entries being free, become
  // visible to whoever reads the count).
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
  // Note [Ring entries].
  struct alignas(16) Entry {
    std::atomic<uint64_t> tag{0};
    uint64_t word = 0;
  };
  static_assert(sizeof(Entry) == 16, "four entries per cache line");
  // A task encoded for the ring: its entries' words, tag and word in turn.
  struct Encoded {
    uint64_t words[2 * kMaxSpan];
    uint64_t span;
  };
  enum EntryKind : uint64_t { kHostFn = 1, kInterned = 2, kUserTask = 3, kNode = 4 };
  static constexpr unsigned kKindShift = 56;
  static constexpr uint64_t kPayloadMask = (uint64_t{1} << kKindShift) - 1;
  static constexpr uint64_t kKindMask = uint64_t{0xF} << kKindShift;
  static constexpr uint64_t kTimestamped = uint64_t{1} << 60;

  struct OverflowNode {
    InlineTask task;
    uint64_t span;  // entries the task counts for (tickets it took)
    OverflowNode* next;
  };

  // The entry of `ticket` in the current ring. relaxed: the ring changes
  // only while no producer may touch it, and the tail word orders the
  // change (see Overflow in Note [Task ring]).
  Entry& entryAt(uint64_t ticket) const noexcept {
    return entries_.load(std::memory_order_relaxed)[ticket & (capacity() - 1)];
  }
  uint64_t capacity() const noexcept { return capacity_.load(std::memory_order_relaxed); }
  // Note [Ring entries]: false if the task's code pointer does not fit.
  static bool encode(const InlineTask& task, Encoded& out) noexcept;
  // Fills `out` from the published task at head_ whose first tag word is
  // `tag`; returns its span. Owner only.
  uint64_t decode(uint64_t tag, InlineTask& out) const noexcept {
    const uint64_t payload = tag & kPayloadMask;
    const uint64_t word = entryAt(head_).word;
    uint64_t span = 1;
    out.enqueueNs = 0;
    switch ((tag & kKindMask) >> kKindShift) {
      case kHostFn:
        out.kind = InlineKind::kHostFn;
        out.hostFn = {reinterpret_cast<npuHostFn_t>(payload), reinterpret_cast<void*>(word)};
        break;
      case kInterned: {
        const TaskDescriptors::Descriptor& d = TaskDescriptors::at(static_cast<uint32_t>(payload));
        out.kind = InlineKind::kUserTask;
        out.user = {d.name, d.run, d.release, reinterpret_cast<void*>(word)};
        break;
      }
      case kUserTask: {
        const Entry& second = entryAt(head_ + 1);
        out.kind = InlineKind::kUserTask;
        out.user = {reinterpret_cast<const char*>(second.word),
                    reinterpret_cast<TaskDescriptors::RunFn>(payload),
                    reinterpret_cast<TaskDescriptors::ReleaseFn>(
                        second.tag.load(std::memory_order_relaxed)),
                    reinterpret_cast<void*>(word)};
        span = 2;
        break;
      }
      default:  // kNode
        out.kind = InlineKind::kNode;
        out.node = reinterpret_cast<Task*>(word);
        break;
    }
    out.externalId = 0;
    if ((tag & kTimestamped) != 0) {
      const Entry& stamp = entryAt(head_ + span);
      out.enqueueNs = stamp.tag.load(std::memory_order_relaxed);
      out.externalId = static_cast<uint32_t>(stamp.word);
      ++span;
    }
    return span;
  }
  Pushed pushOverflow(const InlineTask& task, uint64_t span);
  // Replaces the (empty) ring by a larger one; owner, under overflowMutex_.
  void grow() noexcept;
  void freeChain(OverflowNode* node, bool discard) noexcept;

  // Four cache lines, so that no line is written by one side and read by
  // the other on every task.
  // Producers' line: written by every enqueue.
  alignas(64) std::atomic<uint64_t> tail_{kIdleBit};  // ticket count | flags
  std::atomic<uint64_t> cachedFinished_{0};           // a recent finished count
  // Read by both sides on every task, written only when the ring grows.
  alignas(64) std::atomic<Entry*> entries_;  // the ring (owned)
  std::atomic<uint64_t> capacity_{0};        // its number of entries
  std::atomic<uint64_t>& finished_;          // the stream's finished count (its own line)
  // Consumer's line.
  alignas(64) uint64_t head_ = 0;  // owner: ticket of the next task to take
  uint64_t frontSpan_ = 0;         // owner: entries of the task front() decoded
  OverflowNode* chain_ = nullptr;  // owner: overflow tasks taken from the list

  alignas(64) std::mutex overflowMutex_;  // guards the three below
  OverflowNode* overflowHead_ = nullptr;  // tickets overflowStart_, ... in order
  OverflowNode** overflowTail_ = &overflowHead_;
  uint64_t overflowStart_ = 0;  // first ticket of the current overflow
};

}  // namespace npurt::internal
