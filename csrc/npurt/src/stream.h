// Stream: an in-order, multi-producer task queue with no thread of its own.
//
// Note [Stream ownership]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A stream with work has exactly one owner: the executor thread running it,
// or the ready queue / event version that holds it for an executor. Only the
// owner takes tasks from the queue, so the queue is single-consumer. The
// owner changes through the queue's tail word (Note [Task ring] in
// task_queue.h): the producer whose ticket clears kIdleBit schedules the
// stream; the owner gives it up by setting the bit once the queue is empty.
// An owner that drained the stream lingers on it briefly (Executor::awaitWork)
// so that a producer enqueuing in a loop does not pay a trip through the
// ready queue and a thread wake-up per task.
//
// Note [Stream progress]
// ~~~~~~~~~~~~~~~~~~~~~~
// "Idle" is not ownership: a stream is idle when every enqueued task has
// finished, i.e. when its finished count (StreamProgress, advanced by the
// owner after each task with release) has reached the number of tickets
// handed out. So npuStreamQuery is npuErrorNotReady while a task is queued
// or running, and success while the owner lingers on an empty stream.
// Event versions use the same count (Note [Completion order] in event.h):
// one counter publishes both "the stream is idle" and "the record task has
// run", so no observer can see one without the other.
//
// Synchronize waits for the tasks enqueued before the call, not for
// idleness: it takes the ticket count at the call as its target and waits
// until the finished count reaches it, so a producer that keeps enqueuing
// cannot starve it. Waiters cost the hot path one relaxed load per task:
// a blocked waiter publishes its target (waitTarget_, the smallest one), and
// the owner compares it with the finished count after each task and wakes
// the waiters when it is reached (afterTask). That load may miss a target
// published at the same moment (a store and a load on different lines can
// pass each other); two things close the gap: the owner that finds nothing
// published looks at idleWaiters_ through a seq_cst RMW, a Dekker pair
// with the waiter's increment (see notifyIdle and waitFinished), and a
// blocked waiter re-checks every kWaitSliceNs, which bounds the lateness
// of a wake-up missed while the owner goes on with a long task.
//
// Thread safety: enqueue, idle/query/wait, failure and delay functions are
// thread-safe. queue() consumer functions belong to the owner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "task.h"
#include "task_queue.h"

namespace npurt::internal {

class Executor;

// Number of priority levels; level 0 is the highest priority (-3).
constexpr int kPriorityLevels = 4;
constexpr int kGreatestPriority = -3;
constexpr int kLeastPriority = 0;

// Longest a blocked synchronize sleeps before it looks at the finished count
// again (Note [Stream progress]): the bound on a wake-up the owner missed.
constexpr uint64_t kWaitSliceNs = 1'000'000;

// A stream's finished count, in a block of its own so that event versions
// can keep it (and not the stream with its ring) alive. Written only by the
// stream's owner; its own cache line, away from the producers' line.
struct alignas(64) StreamProgress {
  // Ring entries of the tasks finished (run or discarded), in order: a
  // task counts for the entries it took (Note [Task ring]).
  std::atomic<uint64_t> finished{0};
};

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  // priority must already be clamped to [kGreatestPriority, kLeastPriority].
  // Throws std::bad_alloc (the ring).
  Stream(uint64_t id, int device, unsigned flags, int priority, Executor& executor);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() = default;

  uint64_t id() const noexcept { return id_; }
  int device() const noexcept { return device_; }
  unsigned flags() const noexcept { return flags_; }
  int priority() const noexcept { return priority_; }
  // Ready-queue level: 0 for priority -3 (highest) ... 3 for priority 0.
  int level() const noexcept { return priority_ - kGreatestPriority; }
  Executor& executor() const noexcept { return executor_; }

  // Hot path. Appends a task (a node task is owned by the stream from here)
  // and returns its ticket. Thread-safe. Throws std::bad_alloc only when the
  // ring is full and the overflow node cannot be allocated; the task is not
  // enqueued then (Note [Task ring]).
  uint64_t enqueue(const InlineTask& task);

  // True when every task enqueued so far has finished (Note [Stream
  // progress]). Thread-safe.
  bool idle() const noexcept {
    // Tickets first: a count of finished tasks read afterwards that covers
    // them means all of them finished. acquire (both): a caller that sees
    // the stream idle also sees the effects of every finished task.
    const uint64_t enqueued = queue_.enqueued();
    return finished().load(std::memory_order_acquire) >= enqueued;
  }

  // Tickets handed out so far (ring entries): the target of a
  // synchronize that waits for the work enqueued before it. Thread-safe.
  uint64_t enqueued() const noexcept { return queue_.enqueued(); }

  // Blocks until every task with a ticket below `target` has finished
  // (Note [Stream progress]); tasks enqueued later are not waited for. With
  // timeoutNs >= 0, gives up after that long and returns false. Thread-safe.
  bool waitFinished(uint64_t target, int64_t timeoutNs);

  // Owner only, after each task: wakes waitFinished() callers whose target
  // the finished count has reached. Hot path: one relaxed load and a compare
  // unless somebody waits.
  void afterTask() noexcept {
    if (waitTarget_.load(std::memory_order_relaxed) <= queue_.head()) [[unlikely]]
      wakeWaiters();
  }

  // Wakes waitFinished() callers if any; called by the owner when nothing is
  // published at the queue's front (after publishing the last finished
  // count), and at shutdown.
  void notifyIdle() noexcept;

  // --- Failure state (Note [Task failure rule] in csrc/npurt/README.md) ---
  bool hasFailure() const noexcept { return failed_.load(std::memory_order_acquire); }
  // Enters failure state (keeps the first failure if one is unreported).
  void recordFailure(const char* taskName, const char* message) noexcept;
  // If a failure is held: moves its message into `message`, clears the state
  // and returns true. Thread-safe; a failure is taken exactly once.
  bool takeFailure(std::string& message);
  // If a failure is held: copies its message into `message` and returns
  // true, leaving the failure held. Takes mutex_ briefly, which no executor
  // holds while it runs or releases a task, so it may be called from a
  // task's run or release. Thread-safe.
  bool peekFailure(std::string& message) const;
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

  // --- Capture (Note [Stream capture] in csrc/npurt/README.md) ---
  // True while the stream records into a capture. A hint for the hot path
  // (one relaxed load per launch): the capture registry decides, under its
  // mutex, what a launch on a capturing stream does (graph/capture.h).
  bool capturing() const noexcept { return capturing_.load(std::memory_order_relaxed); }
  void setCapturing(bool on) noexcept { capturing_.store(on, std::memory_order_relaxed); }

  // The executor worker that ran the stream last, or -1; a wake-up hint
  // only (Note [Worker wake order] in executor.h). Thread-safe.
  int lastWorker() const noexcept { return lastWorker_.load(std::memory_order_relaxed); }
  void setLastWorker(int worker) noexcept { lastWorker_.store(worker, std::memory_order_relaxed); }

  // While the trace or the activity log records: when the event wait at the
  // front of the queue was first found incomplete (steady ns), so that its
  // record spans the time the stream was blocked; 0 if it was not. Owner
  // only: the executor that parks the stream sets it, the one that resumes
  // it takes it (the version's mutex orders the two).
  void noteWaitBlocked(uint64_t ns) noexcept {
    if (waitBlockedNs_ == 0) waitBlockedNs_ = ns;
  }
  uint64_t takeWaitBlockedNs() noexcept { return std::exchange(waitBlockedNs_, 0); }

  // --- Destruction (Note [Handle validation]) ---
  // Claims the right to destroy; false if another call already did.
  bool beginDestroy() noexcept { return !destroying_.exchange(true, std::memory_order_acq_rel); }
  void markDestroyed() noexcept { destroyed_.store(true, std::memory_order_release); }
  bool destroyed() const noexcept { return destroyed_.load(std::memory_order_acquire); }

  // The task queue; its consumer functions are owner-only.
  TaskQueue& queue() noexcept { return queue_; }
  // The finished count, for event versions recorded on this stream.
  const std::shared_ptr<const StreamProgress>& progress() const noexcept { return progress_; }

  // Shutdown only, after the executors have been joined: discards every
  // queued task (calling release) and marks the stream idle. See
  // Note [Shutdown order] in csrc/npurt/README.md.
  void discardAllForShutdown() noexcept;

 private:
  friend class StreamList;

  Stream(std::shared_ptr<StreamProgress> progress, uint64_t id, int device, unsigned flags,
         int priority, Executor& executor);

  std::atomic<uint64_t>& finished() const noexcept { return progressWritable_->finished; }

  std::shared_ptr<const StreamProgress> progress_;  // shared with event versions
  StreamProgress* progressWritable_;                // the same block
  TaskQueue queue_;

  // Link for whichever intrusive list holds the stream (a ready queue or an
  // event version's parked list; never both). Guarded by that list's mutex.
  std::shared_ptr<Stream> link_;

  const uint64_t id_;
  const int device_;
  const unsigned flags_;
  const int priority_;
  Executor& executor_;

  uint64_t waitBlockedNs_ = 0;  // see noteWaitBlocked
  std::atomic<int64_t> delayOverrideUs_{-1};
  std::atomic<int> lastWorker_{-1};
  std::atomic<bool> destroying_{false};
  std::atomic<bool> destroyed_{false};
  std::atomic<bool> capturing_{false};  // written under the capture registry's mutex

  // Under mutex_: resets waitTarget_ and wakes every waiter (each one
  // publishes its target again if it still waits).
  void wakeWaiters() noexcept;

  mutable std::mutex mutex_;         // guards the condition variable and failure fields
  std::condition_variable idleCv_;   // signalled when a waiter's target may be reached
  std::atomic<int> idleWaiters_{0};  // threads in waitFinished()
  // Smallest target of the threads blocked in waitFinished(), UINT64_MAX if
  // none. Written under mutex_, read by the owner after each task.
  std::atomic<uint64_t> waitTarget_{UINT64_MAX};
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
