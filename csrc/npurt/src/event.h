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
// Note [Completion order]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Callers rely on "event complete" and "recording stream idle" agreeing:
// after e.synchronize() (or a successful e.query()) of an event recorded as
// the last task of s, s.query() must succeed; after s.synchronize(), every
// event recorded on s must query complete. Two flags published one after
// the other cannot give both directions, so a version is done when *either*
// its own flag is set *or* its stream's finished count (Note [Stream
// progress] in stream.h) has passed the record's ticket. The executor runs a
// record as: stamp the time, publish the finished count (release), then set
// the flag and wake waiters. Hence:
//  - whoever sees the version done saw the count past the record (directly,
//    or through the flag, which is set after it), so the stream is idle if
//    the record was its last task;
//  - whoever saw the stream idle saw a count past every enqueued record, so
//    done() is true for each of them (the ticket is stored by the recording
//    thread right after the enqueue, before any synchronize it can order
//    itself after);
//  - the timestamp is written before either publication.
//
// Thread safety: all public functions of EventVersion and Event are
// thread-safe. EventRecordTask/EventWaitTask follow the task rules (task.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "racecheck/vector_clock.h"
#include "stream.h"
#include "task.h"

namespace npurt::internal {

class EventVersion {
 public:
  EventVersion(int device, std::shared_ptr<const StreamProgress> progress) noexcept
      : device_(device), progress_(std::move(progress)) {}
  EventVersion(const EventVersion&) = delete;
  EventVersion& operator=(const EventVersion&) = delete;

  // See Note [Completion order]. acquire (all loads): pairs with the
  // executor's releases, so timestampNs() and the work before the record
  // are visible once done() is true.
  bool done() const noexcept {
    if (done_.load(std::memory_order_acquire)) return true;
    const uint64_t ticket = ticket_.load(std::memory_order_acquire);
    return ticket != kNoTicket && progress_->finished.load(std::memory_order_acquire) > ticket;
  }
  // Completion time; meaningful only once done().
  uint64_t timestampNs() const noexcept { return timestampNs_; }
  int device() const noexcept { return device_; }

  // The record task's position in its stream; set by the recording thread
  // once the task is enqueued.
  void setTicket(uint64_t ticket) noexcept { ticket_.store(ticket, std::memory_order_release); }

  // Completion, in the order of Note [Completion order]: stamp() before the
  // stream's finished count passes the record, markDone() after. markDone
  // sets the flag, wakes host waiters and re-schedules parked streams.
  // Called once, by the record task's executor (or at shutdown).
  void stamp(uint64_t ns) noexcept { timestampNs_ = ns; }
  void markDone() noexcept;

  // Called by the executor that owns `stream` when the wait task at its
  // head binds to this version. If the version is still incomplete, moves
  // `stream` into the parked list and returns true (the executor gives the
  // stream up; the wait task stays at the queue's front). Returns false if
  // the version completed meanwhile (the executor keeps going).
  bool parkUnlessDone(std::shared_ptr<Stream>& stream) noexcept;

  // Blocks the calling host thread until done().
  void waitHost();

  // The race detector's clock of the version (Note [Happens-before model]
  // in racecheck/racecheck.h): set before the version is published, null
  // while the detector is off. Guarded by the detector's mutex.
  const std::shared_ptr<const racecheck::VectorClock>& raceClock() const noexcept {
    return raceClock_;
  }
  void setRaceClock(std::shared_ptr<const racecheck::VectorClock> clock) noexcept {
    raceClock_ = std::move(clock);
  }

 private:
  static constexpr uint64_t kNoTicket = UINT64_MAX;

  std::atomic<bool> done_{false};
  std::atomic<uint64_t> ticket_{kNoTicket};               // see setTicket()
  uint64_t timestampNs_ = 0;                              // written before either publication
  const int device_;                                      // device of the recording stream
  const std::shared_ptr<const StreamProgress> progress_;  // of the recording stream

  std::mutex mutex_;            // guards parked_, hostWaiters_
  std::condition_variable cv_;  // host waiters
  int hostWaiters_ = 0;         // threads blocked in waitHost()
  StreamList parked_;           // streams whose head waits on this version
  std::shared_ptr<const racecheck::VectorClock> raceClock_;  // see raceClock()
};

// The record task of one version; owns the version (see file comment).
class EventRecordTask final : public Task {
 public:
  // Creates the task for a record on `stream`, with a self-reference that
  // keeps it alive until it has been run (or discarded) and disposed. Call
  // enqueue with get() next.
  static std::shared_ptr<EventRecordTask> create(const Stream& stream);
  // A record no stream runs (npuEventRecordDeferred): its version completes
  // only through discard(), called by npuEventCompleteDeferred. No
  // self-reference: the deferred-record registry holds it.
  static std::shared_ptr<EventRecordTask> createDeferred(int device);

  EventRecordTask(int device, std::shared_ptr<const StreamProgress> progress) noexcept
      : Task(TaskKind::kEventRecord), version_(device, std::move(progress)) {}

  const char* name() const noexcept override { return "npuEventRecord"; }
  npuActivityKind activityKind() const noexcept override { return npuActivityKindEventRecord; }
  // Not used by the executor, which completes records itself (Note
  // [Completion order]); completes the version.
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
  npuActivityKind activityKind() const noexcept override { return npuActivityKindEventWait; }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override { return 0; }
  EventVersion& version() const noexcept { return *version_; }

 private:
  std::shared_ptr<EventVersion> version_;
};

struct CapturedRecord;  // graph/capture.h

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

  // Makes a new version (recorded on `stream`) the latest and returns its
  // record task for the caller to enqueue. Ends the captured state.
  std::shared_ptr<EventRecordTask> newVersion(const Stream& stream);
  // Makes a deferred version (createDeferred) the latest.
  std::shared_ptr<EventRecordTask> newDeferredVersion(int device);

  // Note [Stream capture]: the record made by a capture, if the event was
  // last recorded in one (then it has no version to query or wait for
  // outside that capture), else null.
  std::shared_ptr<const CapturedRecord> captured() const;
  void setCaptured(std::shared_ptr<const CapturedRecord> record, int device);
  // captured() != null, without the mutex: the common "no" costs a relaxed
  // load (a record racing with the caller is unordered with it anyway).
  bool maybeCaptured() const noexcept { return capturedFlag_.load(std::memory_order_relaxed); }

 private:
  const uint64_t id_;
  const unsigned flags_;
  mutable std::mutex mutex_;              // guards latest_, device_, captured_
  std::shared_ptr<EventVersion> latest_;  // aliases into an EventRecordTask
  std::shared_ptr<const CapturedRecord> captured_;
  std::atomic<bool> capturedFlag_{false};  // captured_ != null; written under mutex_
  int device_ = -1;
};

}  // namespace npurt::internal
