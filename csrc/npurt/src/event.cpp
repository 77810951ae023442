// Event versions, record tasks and events. See Note [Event versioning] in
// csrc/npurt/README.md.
#include "event.h"

#include "clock.h"
#include "executor.h"

namespace npurt::internal {

void EventVersion::complete(uint64_t ns) noexcept {
  StreamList toResume;
  bool wakeHost = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;
    timestampNs_ = ns;
    // release: publishes timestampNs_ and, transitively, everything the
    // recording stream did before the record, to done() readers.
    done_.store(true, std::memory_order_release);
    toResume = std::move(parked_);
    wakeHost = hostWaiters_ > 0;
  }
  if (wakeHost) cv_.notify_all();
  // Outside the mutex: schedule() takes the target executor's mutex.
  while (std::shared_ptr<Stream> stream = toResume.pop()) {
    Executor& executor = stream->executor();
    executor.schedule(std::move(stream));
  }
}

bool EventVersion::parkUnlessDone(std::shared_ptr<Stream>& stream, Task* waitTask) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  // The double check: complete() sets done_ under this mutex, so either we
  // see it here or complete() sees our registration.
  if (done_.load(std::memory_order_relaxed)) return false;
  // The head is written before the mutex is released; the executor that
  // resumes the stream acquires it through complete() and schedule().
  stream->setHead(waitTask);
  parked_.push(std::move(stream));
  return true;
}

void EventVersion::waitHost() {
  if (done()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++hostWaiters_;
  cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  --hostWaiters_;
}

std::shared_ptr<EventRecordTask> EventRecordTask::create(int device) {
  auto task = std::make_shared<EventRecordTask>(device);  // the one allocation
  task->self_ = task;
  return task;
}

int EventRecordTask::run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept {
  version_.complete(nowNs());
  return 0;
}

void EventRecordTask::discard() noexcept { version_.complete(nowNs()); }

void EventRecordTask::dispose() noexcept {
  // Moving the self-reference out first: if it is the last reference, the
  // task (and this->self_) is destroyed when `self` goes out of scope, after
  // the last use of a member.
  std::shared_ptr<EventRecordTask> self = std::move(self_);
}

std::shared_ptr<EventVersion> Event::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

int Event::device() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_;
}

std::shared_ptr<EventRecordTask> Event::newVersion(int device) {
  std::shared_ptr<EventRecordTask> task = EventRecordTask::create(device);
  std::lock_guard<std::mutex> lock(mutex_);
  // Aliasing constructor: shares the task's control block, no allocation.
  latest_ = std::shared_ptr<EventVersion>(task, &task->version());
  device_ = device;
  return task;
}

}  // namespace npurt::internal
