// Stream: enqueue, idle waiting and failure state.
// See Note [Pending count] in stream.h.
#include "stream.h"

#include <chrono>
#include <cstdio>

#include "executor.h"

namespace npurt::internal {
namespace {

// Orders failures across streams so that npuDeviceSynchronize can report the
// first one. Relaxed: only the values matter, not what they publish.
std::atomic<uint64_t> gFailureSequence{1};

}  // namespace

Stream::Stream(uint64_t id, int device, unsigned flags, int priority, Executor& executor) noexcept
    : id_(id), device_(device), flags_(flags), priority_(priority), executor_(executor) {}

Stream::~Stream() {
  // Normally empty: a stream is released only after it drained. After a
  // shutdown race a node may remain; free it without running it.
  while (Task* task = takeNext()) {
    task->discard();
    task->dispose();
  }
}

void Stream::enqueue(Task* task) noexcept {
  // Count before push; see Note [Pending count]. acq_rel: acquire pairs with
  // the release of the previous owner's final decrement, so a producer that
  // becomes the owner (old == 0) hands on a queue state that includes all of
  // the previous owner's pops; release is not needed for the push (the
  // queue's own exchange publishes the node).
  const uint64_t old = pending().fetch_add(1, std::memory_order_acq_rel);
  queue_.push(task);
  if (old == 0) {
    // The stream had no owner: this producer schedules it. shared_from_this
    // (one atomic increment) only happens on this 0 -> 1 transition.
    executor_.schedule(shared_from_this());
  }
}

void Stream::notifyIdle() noexcept {
  // seq_cst pairs with waitIdle's seq_cst increment of idleWaiters_: either
  // the waiter sees count == 0, or we see the waiter (Dekker). The count
  // decrement that precedes this call is seq_cst too.
  if (idleWaiters_.load(std::memory_order_seq_cst) == 0) return;
  {
    // Taking the mutex orders us after a waiter that checked the count but
    // has not blocked yet: it is either before its check or inside wait().
    std::lock_guard<std::mutex> lock(mutex_);
  }
  idleCv_.notify_all();
}

bool Stream::waitIdle(int64_t timeoutNs) {
  if (idle()) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  idleWaiters_.fetch_add(1, std::memory_order_seq_cst);
  const auto isIdle = [this] {
    return (pending().load(std::memory_order_seq_cst) & kCountMask) == 0;
  };
  bool done = true;
  if (timeoutNs < 0) {
    idleCv_.wait(lock, isIdle);
  } else {
    done = idleCv_.wait_for(lock, std::chrono::nanoseconds(timeoutNs), isIdle);
  }
  idleWaiters_.fetch_sub(1, std::memory_order_relaxed);
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

uint64_t Stream::failureSequence() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_.load(std::memory_order_relaxed) ? failureSequence_ : UINT64_MAX;
}

void Stream::discardAllForShutdown() noexcept {
  // The executors are joined, so this thread is the only consumer. A node
  // whose producer is still half-way through push() (a racing call at exit)
  // stays behind; pop() reports it as absent and we do not wait for it.
  while (Task* task = takeNext()) {
    task->discard();
    task->dispose();
  }
  pending().store(0, std::memory_order_seq_cst);
  notifyIdle();
}

}  // namespace npurt::internal
