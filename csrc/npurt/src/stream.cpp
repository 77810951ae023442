// Stream: enqueue, idle waiting and failure state.
// See Note [Stream ownership] and Note [Stream progress] in stream.h.
#include "stream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "clock.h"
#include "executor.h"

namespace npurt::internal {
namespace {

// Orders failures across streams so that npuDeviceSynchronize can report the
// first one. Relaxed: only the values matter, not what they publish.
std::atomic<uint64_t> gFailureSequence{1};

}  // namespace

namespace {

std::shared_ptr<StreamProgress> makeProgress() { return std::make_shared<StreamProgress>(); }

}  // namespace

Stream::Stream(uint64_t id, int device, unsigned flags, int priority, Executor& executor)
    : Stream(makeProgress(), id, device, flags, priority, executor) {}

Stream::Stream(std::shared_ptr<StreamProgress> progress, uint64_t id, int device, unsigned flags,
               int priority, Executor& executor)
    : progress_(progress),
      progressWritable_(progress.get()),
      queue_(progress->finished),
      id_(id),
      device_(device),
      flags_(flags),
      priority_(priority),
      executor_(executor) {}

uint64_t Stream::enqueue(const InlineTask& task) {
  const TaskQueue::Pushed pushed = queue_.push(task);
  if (pushed.wasIdle) {
    // This producer took the stream over from idle (Note [Stream
    // ownership]) and hands it to an executor. shared_from_this (one atomic
    // increment) only happens on this transition.
    executor_.schedule(shared_from_this());
  }
  return pushed.ticket;
}

void Stream::notifyIdle() noexcept {
  // Dekker pair with waitFinished, without a fence (ThreadSanitizer does
  // not model fences): an RMW on idleWaiters_, after the owner's last store
  // of the finished count. If it comes before a waiter's increment (reads
  // 0), the waiter's seq_cst increment reads our write and synchronizes with
  // it, so the waiter's following load sees our finished count; otherwise
  // we see the waiter here.
  if (idleWaiters_.fetch_add(0, std::memory_order_seq_cst) == 0) return;
  wakeWaiters();
}

void Stream::wakeWaiters() noexcept {
  {
    // Taking the mutex orders us after a waiter that checked the count but
    // has not blocked yet: it is either before its check or inside wait().
    std::lock_guard<std::mutex> lock(mutex_);
    waitTarget_.store(UINT64_MAX, std::memory_order_relaxed);  // waiters publish again
  }
  idleCv_.notify_all();
}

bool Stream::waitFinished(uint64_t target, int64_t timeoutNs) {
  const auto reached = [&] { return finished().load(std::memory_order_acquire) >= target; };
  // Note [Spin before blocking].
  const uint64_t spinNs =
      timeoutNs < 0 ? kSpinBeforeBlockNs
                    : std::min<uint64_t>(kSpinBeforeBlockNs, static_cast<uint64_t>(timeoutNs));
  if (spinUntil(reached, spinNs)) return true;
  const uint64_t deadline =
      timeoutNs < 0 ? UINT64_MAX : nowNs() + static_cast<uint64_t>(timeoutNs) - spinNs;
  std::unique_lock<std::mutex> lock(mutex_);
  idleWaiters_.fetch_add(1, std::memory_order_seq_cst);
  bool done = false;
  for (;;) {
    // Publish (again: the owner resets it when it wakes us) the smallest
    // target, then look: see Note [Stream progress] for the race this leaves.
    if (waitTarget_.load(std::memory_order_relaxed) > target) {
      waitTarget_.store(target, std::memory_order_seq_cst);
    }
    if (finished().load(std::memory_order_seq_cst) >= target) {
      done = true;
      break;
    }
    const uint64_t now = nowNs();
    if (now >= deadline) break;
    idleCv_.wait_for(lock, std::chrono::nanoseconds(std::min(deadline - now, kWaitSliceNs)));
  }
  idleWaiters_.fetch_sub(1, std::memory_order_relaxed);
  // A target of ours left in waitTarget_ costs the owner one spurious
  // wakeWaiters() when it is reached.
  return done;
}

void Stream::recordFailure(const char* taskName, const char* message) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;  // keep the first one
  try {
    failureMessage_ = std::string("task '") + taskName + "' failed on stream " +
                      std::to_string(id_) + " (device " + std::to_string(device_) +
                      "): " + (message[0] != '\0' ? message : "(no message)");
  } catch (...) {
    failureMessage_.clear();  // out of memory: report without the details
  }
  failureSequence_ = gFailureSequence.fetch_add(1, std::memory_order_relaxed);
  // release: pairs with hasFailure()'s acquire (the executor only needs the
  // flag, reporters read the message under the mutex).
  failed_.store(true, std::memory_order_release);
}

bool Stream::takeFailure(std::string& message) {
  if (!hasFailure()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_.load(std::memory_order_relaxed)) return false;  // reported meanwhile
  message = failureMessage_.empty() ? "task failed on stream " + std::to_string(id_)
                                    : std::move(failureMessage_);
  failureMessage_.clear();
  failed_.store(false, std::memory_order_release);
  return true;
}

bool Stream::peekFailure(std::string& message) const {
  if (!hasFailure()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_.load(std::memory_order_relaxed)) return false;  // reported meanwhile
  message =
      failureMessage_.empty() ? "task failed on stream " + std::to_string(id_) : failureMessage_;
  return true;
}

uint64_t Stream::failureSequence() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_.load(std::memory_order_relaxed) ? failureSequence_ : UINT64_MAX;
}

void Stream::discardAllForShutdown() noexcept {
  // The executors are joined, so this thread is the only consumer. A task
  // whose producer is still half-way through push() (a racing call at exit)
  // stays behind; we do not wait for it.
  queue_.discardAll();
  // Whatever stayed behind counts as finished, so that no waiter hangs.
  finished().store(queue_.enqueued(), std::memory_order_seq_cst);
  notifyIdle();
}

}  // namespace npurt::internal
