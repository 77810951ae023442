// Event versions, record tasks and events. See Note [Event versioning] in
// csrc/npurt/README.md.
#include "event.h"

#include "clock.h"
#include "executor.h"

namespace npurt::internal {

void EventVersion::markDone() noexcept {
  StreamList toResume;
  bool wakeHost = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;
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

bool EventVersion::parkUnlessDone(std::shared_ptr<Stream>& stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  // The double check: markDone() sets done_ under this mutex, so either we
  // see it here or markDone() sees our registration. (The finished-count
  // path of done() needs no check here: the flag follows it shortly and
  // resumes the stream.)
  if (done_.load(std::memory_order_relaxed)) return false;
  parked_.push(std::move(stream));
  return true;
}

void EventVersion::waitHost() {
  // Note [Spin before blocking].
  if (spinUntil([this] { return done(); }, kSpinBeforeBlockNs)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++hostWaiters_;
  // The flag always follows the finished count (Note [Completion order]),
  // so waiting for the flag cannot miss a completion.
  cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  --hostWaiters_;
}

std::shared_ptr<EventRecordTask> EventRecordTask::create(const Stream& stream) {
  // The one allocation.
  auto task = std::make_shared<EventRecordTask>(stream.device(), stream.progress());
  task->self_ = task;
  return task;
}

std::shared_ptr<EventRecordTask> EventRecordTask::createDeferred(int device) {
  // A progress block of its own that never advances: the version has no
  // ticket, so only its flag (discard()) completes it.
  return std::make_shared<EventRecordTask>(device, std::make_shared<const StreamProgress>());
}

int EventRecordTask::run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept {
  discard();
  return 0;
}

void EventRecordTask::discard() noexcept {
  // Shutdown, or a record whose enqueue failed: the stream's count will not
  // pass the record, so the flag alone completes the version.
  version_.stamp(nowNs());
  version_.markDone();
}

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

std::shared_ptr<EventRecordTask> Event::newVersion(const Stream& stream) {
  std::shared_ptr<EventRecordTask> task = EventRecordTask::create(stream);
  const int device = stream.device();
  std::lock_guard<std::mutex> lock(mutex_);
  // Aliasing constructor: shares the task's control block, no allocation.
  latest_ = std::shared_ptr<EventVersion>(task, &task->version());
  captured_.reset();
  capturedFlag_.store(false, std::memory_order_relaxed);
  device_ = device;
  return task;
}

std::shared_ptr<EventRecordTask> Event::newDeferredVersion(int device) {
  std::shared_ptr<EventRecordTask> task = EventRecordTask::createDeferred(device);
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = std::shared_ptr<EventVersion>(task, &task->version());
  captured_.reset();
  capturedFlag_.store(false, std::memory_order_relaxed);
  device_ = device;
  return task;
}

std::shared_ptr<const CapturedRecord> Event::captured() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return captured_;
}

void Event::setCaptured(std::shared_ptr<const CapturedRecord> record, int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  captured_ = std::move(record);
  capturedFlag_.store(captured_ != nullptr, std::memory_order_relaxed);
  device_ = device;
}

}  // namespace npurt::internal
