// Events and their versions. See Note [Event versioning] in
// csrc/npurt/README.md.
//
// Every npuEventRecord creates a new EventVersion. The version lives inside
// its record task (EventRecordTask: one allocation for both), and everything
// that binds to the version (the event's "latest" slot, wait tasks, host
// waiters) holds an aliasing shared_ptr into that allocation. A version
// completes exactly once, when its record task runs (or is discarded at
// shutdown), and then:
//  - wakes host threads blocked in npuEventSynchronize on it, and
//  - re-schedules every stream parked on it. A stream parks when the event
//    wait task at its head finds the version incomplete; parking registers
//    the stream under the version's mutex and re-checks `done` there, so a
//    completion cannot slip between the check and the registration.
//
// Thread safety: all public functions of EventVersion and Event are
// thread-safe. EventRecordTask/EventWaitTask follow the task rules (task.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "stream.h"
#include "task.h"

namespace npurt::internal {

class EventVersion {
 public:
  explicit EventVersion(int device) noexcept : device_(device) {}
  EventVersion(const EventVersion&) = delete;
  EventVersion& operator=(const EventVersion&) = delete;

  // acquire: pairs with complete()'s release, so timestampNs() and the work
  // before the record are visible once done() is true.
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  // Completion time; meaningful only once done().
  uint64_t timestampNs() const noexcept { return timestampNs_; }
  int device() const noexcept { return device_; }

  // Marks the version complete at `ns`, wakes host waiters and re-schedules
  // parked streams. Called once, by the record task.
  void complete(uint64_t ns) noexcept;

  // Called by the executor that owns `stream` when the wait task `waitTask`
  // at its head binds to this version. If the version is still incomplete,
  // stores waitTask as the stream's head, moves `stream` into the parked
  // list and returns true (the executor gives the stream up). Returns false
  // if the version completed meanwhile (the executor keeps going).
  bool parkUnlessDone(std::shared_ptr<Stream>& stream, Task* waitTask) noexcept;

  // Blocks the calling host thread until done().
  void waitHost();

 private:
  std::atomic<bool> done_{false};
  uint64_t timestampNs_ = 0;  // written before done_ is released
  const int device_;          // device of the recording stream

  std::mutex mutex_;            // guards parked_, hostWaiters_
  std::condition_variable cv_;  // host waiters
  int hostWaiters_ = 0;         // threads blocked in waitHost()
  StreamList parked_;           // streams whose head waits on this version
};

// The record task of one version; owns the version (see file comment).
class EventRecordTask final : public Task {
 public:
  // Creates the task with a self-reference that keeps it alive until it has
  // been run (or discarded) and disposed. Call enqueue with get() next.
  static std::shared_ptr<EventRecordTask> create(int device);

  explicit EventRecordTask(int device) noexcept : Task(TaskKind::kEventRecord), version_(device) {}

  const char* name() const noexcept override { return "npuEventRecord"; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  // Shutdown: complete the version anyway so that no host waiter hangs.
  void discard() noexcept override;
  void dispose() noexcept override;

  EventVersion& version() noexcept { return version_; }

 private:
  EventVersion version_;
  std::shared_ptr<EventRecordTask> self_;  // reset by dispose()
};

// npuStreamWaitEvent: holds the bound version. The executor checks it before
// running the task (see Executor::runStream); run() itself does nothing.
class EventWaitTask final : public Task {
 public:
  explicit EventWaitTask(std::shared_ptr<EventVersion> version) noexcept
      : Task(TaskKind::kEventWait), version_(std::move(version)) {}
  const char* name() const noexcept override { return "npuStreamWaitEvent"; }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override { return 0; }
  EventVersion& version() const noexcept { return *version_; }

 private:
  std::shared_ptr<EventVersion> version_;
};

class Event {
 public:
  Event(uint64_t id, unsigned flags) noexcept : id_(id), flags_(flags) {}

  uint64_t id() const noexcept { return id_; }
  unsigned flags() const noexcept { return flags_; }
  bool timingDisabled() const noexcept { return (flags_ & npuEventDisableTiming) != 0u; }

  // The latest version, or null if the event was never recorded.
  std::shared_ptr<EventVersion> latest() const;
  // Device of the latest record, -1 if never recorded.
  int device() const;

  // Makes a new version (recorded on `device`) the latest and returns its
  // record task for the caller to enqueue.
  std::shared_ptr<EventRecordTask> newVersion(int device);

 private:
  const uint64_t id_;
  const unsigned flags_;
  mutable std::mutex mutex_;              // guards latest_, device_
  std::shared_ptr<EventVersion> latest_;  // aliases into an EventRecordTask
  int device_ = -1;
};

}  // namespace npurt::internal
