// c10_npu::NPUExternalEvent — torch_npu's ExternalEvent (an event created
// with ACL_EVENT_EXTERNAL) on the simulated NPU.
//
// Layer: framework core.
//
// Semantics (torch_npu): record writes a value, wait waits for that value and
// resets it; a wait may be queued *before* its record, and one record pairs
// with exactly one wait ("External event: A single record operation cannot
// be associated with multiple wait operations."). reset() clears the host-side
// pairing state so the event can be reused.
//
// Note [External event gates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// npurt events bind a wait to the version that exists when the wait is
// issued, so a wait issued before any record would be a no-op. Two paths:
//  - record first (the usual case): record = an event record on the stream,
//    wait = a stream wait on it. The waiting stream is parked by npurt and
//    holds no executor core.
//  - wait first: the wait creates a *gate*: a deferred version of a private
//    runtime event (npuEventRecordDeferred: a version no stream completes),
//    which the waiting stream waits on, so it is parked and holds no core.
//    The later record launches, on the recording stream, a task whose run
//    (or, if the stream is in a failure state, whose release) opens the gate
//    by completing that version (npuEventCompleteDeferred). Nothing occupies
//    an executor core meanwhile, so any number of waits may precede their
//    records. Destroying the event opens a pending gate (the waiting stream
//    is then released without a record), so a forgotten record never parks
//    a stream beyond the event's lifetime.
//
// Thread-safe: one NPUExternalEvent may be used from several threads.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "npurt/npurt.h"

namespace c10_npu {

class NPUExternalEvent {
 public:
  NPUExternalEvent() = default;
  ~NPUExternalEvent();
  NPUExternalEvent(const NPUExternalEvent&) = delete;
  NPUExternalEvent& operator=(const NPUExternalEvent&) = delete;

  // Writes the value on `stream` (after the work queued on it). Opens the
  // pending gate if a wait came first. Raises for an external stream in
  // compat mode.
  void record(const NPUStream& stream);

  // Makes future work on `stream` wait for the value of the latest record (or
  // of the next record, if none is pending; see the note). Raises for an
  // external stream in compat mode and for a second wait of one record.
  void wait(const NPUStream& stream);

  // Clears the pairing state (the next wait pairs with the next record). The
  // caller makes sure the work that used the event finished, as torch_npu
  // requires. `stream` is validated only.
  void reset(const NPUStream& stream);

  // The runtime event of the record-first path (nullptr until recorded).
  npuEvent_t event() const;
  std::optional<c10::Device> device() const;

  // Number of gates currently waiting on `device` (for tests). Thread-safe.
  static int pendingGates(c10::DeviceIndex device);

  struct Gate;

 private:
  mutable std::mutex mutex_;
  NPUEvent event_{npuEventDisableTiming};  // record-first path
  bool available_ = false;                 // a record was issued that no wait consumed yet
  bool waited_ = false;                    // torch_npu's is_waited_: the latest record has its wait
  std::shared_ptr<Gate> pendingGate_;      // a wait issued before its record
};

}  // namespace c10_npu
