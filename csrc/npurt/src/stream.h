// Stream: an in-order, multi-producer task queue with no thread of its own.
//
// Note [Pending count]
// ~~~~~~~~~~~~~~~~~~~~
// The pending word (pending()) packs two things into one atomic word:
//  - the low 63 bits count tasks enqueued and not yet finished (queued,
//    parked on an event, or running). It is incremented by the producer
//    *before* it pushes the node, and decremented by the executor only after
//    the task has finished, so "count == 0" means exactly "nothing queued or
//    running" (Note [Stream scheduling rule] in csrc/npurt/README.md): a
//    returned enqueue is always visible to npuStreamQuery.
//  - kLingerBit: an executor that drained the stream keeps owning it for a
//    few microseconds, spinning for more work, so that a producer enqueuing
//    in a loop does not pay a trip through the ready queue and a thread wake-
//    up per task. The bit keeps the word non-zero while the count is zero.
// Ownership follows from the word: the producer whose fetch_add finds the
// word 0 owns the stream and hands it to the executor (ready queue); from
// then on exactly one executor owns it (runs it, or parks it on an event
// version) until an executor moves the word back to 0. Only the owner pops
// the queue, which makes the queue single-consumer. Because the count is
// raised before the push, an owner can see count > 0 while the node is not
// linked yet; it then retries the pop (the producer is a few instructions
// from finishing).
//
// Idle waiters (npuStreamSynchronize) do not cost the hot path anything: the
// executor that brings the count to 0 looks at idleWaiters_ and takes the
// mutex only if somebody waits (a Dekker pair of seq_cst operations, see
// notifyIdle and waitIdle).
//
// Thread safety: enqueue, idle/query/wait, failure and delay functions are
// thread-safe. The members marked "owner" are touched only by the thread that
// currently owns the stream (see above).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "mpsc_queue.h"
#include "task.h"

namespace npurt::internal {

class Executor;

// Number of priority levels; level 0 is the highest priority (-3).
constexpr int kPriorityLevels = 4;
constexpr int kGreatestPriority = -3;
constexpr int kLeastPriority = 0;

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  static constexpr uint64_t kLingerBit = uint64_t{1} << 63;
  static constexpr uint64_t kCountMask = kLingerBit - 1;

  // priority must already be clamped to [kGreatestPriority, kLeastPriority].
  Stream(uint64_t id, int device, unsigned flags, int priority, Executor& executor) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  uint64_t id() const noexcept { return id_; }
  int device() const noexcept { return device_; }
  unsigned flags() const noexcept { return flags_; }
  int priority() const noexcept { return priority_; }
  // Ready-queue level: 0 for priority -3 (highest) ... 3 for priority 0.
  int level() const noexcept { return priority_ - kGreatestPriority; }
  Executor& executor() const noexcept { return executor_; }

  // Hot path. Takes ownership of `task` and appends it. Thread-safe, never
  // fails (no allocation).
  void enqueue(Task* task) noexcept;

  // True when nothing is queued or running. Thread-safe.
  bool idle() const noexcept {
    // acquire: a caller that sees the count at 0 also sees the effects of
    // every finished task (released by the executor's decrement).
    return (pending().load(std::memory_order_acquire) & kCountMask) == 0;
  }

  // Blocks until idle(). With timeoutNs >= 0, gives up after that long and
  // returns false. Thread-safe.
  bool waitIdle(int64_t timeoutNs);

  // Wakes waitIdle() callers; called by whoever brought the count to 0.
  void notifyIdle() noexcept;

  // --- Failure state (Note [Task failure rule] in csrc/npurt/README.md) ---
  bool hasFailure() const noexcept { return failed_.load(std::memory_order_acquire); }
  // Enters failure state (keeps the first failure if one is unreported).
  void recordFailure(const char* taskName, const char* message) noexcept;
  // If a failure is held: moves its message into `message`, clears the state
  // and returns true. Thread-safe; a failure is taken exactly once.
  bool takeFailure(std::string& message);
  // Sequence number of the held failure (global order of failures), or
  // UINT64_MAX if none.
  uint64_t failureSequence() const;

  // --- Task delay (Note [Task delay]) ---
  // -1: use the global delay.
  int64_t delayOverrideUs() const noexcept {
    return delayOverrideUs_.load(std::memory_order_relaxed);
  }
  void setDelayOverrideUs(int64_t us) noexcept {
    delayOverrideUs_.store(us, std::memory_order_relaxed);
  }

  // --- Destruction (Note [Handle validation]) ---
  // Claims the right to destroy; false if another call already did.
  bool beginDestroy() noexcept { return !destroying_.exchange(true, std::memory_order_acq_rel); }
  void markDestroyed() noexcept { destroyed_.store(true, std::memory_order_release); }
  bool destroyed() const noexcept { return destroyed_.load(std::memory_order_acquire); }

  // --- Owner-only (see Note [Pending count]) ---
  // Next task to run: the parked head if any, else the queue's oldest node.
  Task* takeNext() noexcept {
    if (Task* head = head_; head != nullptr) {
      head_ = nullptr;
      return head;
    }
    return static_cast<Task*>(queue_.pop());
  }
  // Puts back a task that could not run yet (an event wait, when parking).
  void setHead(Task* task) noexcept { head_ = task; }

  // Shutdown only, after the executors have been joined: discards every
  // queued task (calling release) and marks the stream idle. See
  // Note [Shutdown order] in csrc/npurt/README.md.
  void discardAllForShutdown() noexcept;

  // The pending word; see Note [Pending count]. It shares the producers'
  // cache line with the queue's head (MpscQueue::counter()).
  std::atomic<uint64_t>& pending() noexcept { return queue_.counter(); }
  const std::atomic<uint64_t>& pending() const noexcept { return queue_.counter(); }

 private:
  friend class StreamList;

  MpscQueue queue_;  // tasks not yet taken by the owner
  // owner: a task taken from the queue but not run yet (a parked event wait).
  Task* head_ = nullptr;

  // Link for whichever intrusive list holds the stream (a ready queue or an
  // event version's parked list; never both). Guarded by that list's mutex.
  std::shared_ptr<Stream> link_;

  const uint64_t id_;
  const int device_;
  const unsigned flags_;
  const int priority_;
  Executor& executor_;

  std::atomic<int64_t> delayOverrideUs_{-1};
  std::atomic<bool> destroying_{false};
  std::atomic<bool> destroyed_{false};

  mutable std::mutex mutex_;         // guards the condition variable and failure fields
  std::condition_variable idleCv_;   // signalled when the count reaches 0
  std::atomic<int> idleWaiters_{0};  // threads in waitIdle()
  std::atomic<bool> failed_{false};  // a failure is held (fast check for the executor)
  std::string failureMessage_;       // guarded by mutex_
  uint64_t failureSequence_ = 0;     // guarded by mutex_
};

// Intrusive FIFO of streams through Stream::link_, holding a reference to
// each. Not thread-safe: the owner guards it with its own mutex.
class StreamList {
 public:
  StreamList() = default;
  StreamList(StreamList&& other) noexcept
      : head_(std::move(other.head_)), tail_(std::exchange(other.tail_, nullptr)) {}
  StreamList& operator=(StreamList&& other) noexcept {
    if (this != &other) {
      clear();
      head_ = std::move(other.head_);
      tail_ = std::exchange(other.tail_, nullptr);
    }
    return *this;
  }
  StreamList(const StreamList&) = delete;
  StreamList& operator=(const StreamList&) = delete;
  ~StreamList() { clear(); }

  bool empty() const noexcept { return head_ == nullptr; }
  void push(std::shared_ptr<Stream> stream) noexcept {
    Stream* raw = stream.get();
    raw->link_.reset();
    if (tail_ != nullptr) {
      tail_->link_ = std::move(stream);
    } else {
      head_ = std::move(stream);
    }
    tail_ = raw;
  }
  std::shared_ptr<Stream> pop() noexcept {
    std::shared_ptr<Stream> front = std::move(head_);
    if (front != nullptr) {
      head_ = std::move(front->link_);
      if (head_ == nullptr) tail_ = nullptr;
    }
    return front;
  }
  void clear() noexcept {
    while (pop() != nullptr) {
    }
  }

 private:
  std::shared_ptr<Stream> head_;
  Stream* tail_ = nullptr;
};

}  // namespace npurt::internal
