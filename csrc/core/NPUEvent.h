// c10_npu::NPUEvent — an event of the simulated NPU, as torch_npu has it.
//
// Layer: framework core.
//
// The runtime event is created lazily, on the first record, on the device of
// the recording stream; an event never recorded queries true and blocking on
// it is a no-op (PyTorch's rules). Records and waits go through the task
// queue, so they are ordered with the ops queued on the same stream. See
// Note [Event versioning] in csrc/npurt/README.md for what a wait binds to.
//
// Not thread-safe for concurrent use of one NPUEvent object (like
// at::cuda::CUDAEvent); distinct events may be used from any threads.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

#include "core/NPUStream.h"
#include "npurt/npurt.h"

namespace c10_npu {

class NPUEvent {
 public:
  // flags: npuEventDefault / npuEventBlockingSync / npuEventDisableTiming.
  // torch_npu's default is timing disabled.
  explicit NPUEvent(unsigned int flags = npuEventDisableTiming) noexcept : flags_(flags) {}
  ~NPUEvent();

  NPUEvent(const NPUEvent&) = delete;
  NPUEvent& operator=(const NPUEvent&) = delete;
  NPUEvent(NPUEvent&& other) noexcept;
  NPUEvent& operator=(NPUEvent&& other) noexcept;

  bool isCreated() const { return event_ != nullptr; }
  c10::DeviceIndex device_index() const { return device_index_; }
  std::optional<c10::Device> device() const;
  npuEvent_t event() const { return event_; }
  unsigned int flags() const { return flags_; }

  // True if never recorded, or the latest record completed.
  bool query() const;

  // Records on the current stream of the event's device (or the current
  // device if not created yet).
  void record();
  // Records on `stream`: "Event device X does not match recording stream's
  // device Y." if the event was created on another device. Raises for an
  // external stream in compat mode.
  void record(const NPUStream& stream);
  // Records only if never recorded.
  void recordOnce(const NPUStream& stream);

  // Makes future work on `stream` wait for the latest record. No-op if never
  // recorded. Raises for an external stream in compat mode.
  void block(const NPUStream& stream);

  // Milliseconds between this event's and `other`'s completion; waits for
  // both. Raises if either was not recorded or timing is disabled.
  float elapsed_time(const NPUEvent& other) const;

  // Completion time of the latest record in microseconds (monotonic clock);
  // waits for it. Raises if never recorded.
  uint64_t recorded_time() const;

  // Blocks until the latest record completed. No-op if never recorded.
  void synchronize() const;

 private:
  void createEvent(c10::DeviceIndex device);
  void moveFrom(NPUEvent& other) noexcept;

  unsigned int flags_ = npuEventDisableTiming;
  c10::DeviceIndex device_index_ = -1;
  npuEvent_t event_ = nullptr;
  bool was_recorded_ = false;
  // The stream of the latest record: its queue must be drained before the
  // runtime can see the record (query, synchronize, a wait through another queue).
  std::optional<NPUStream> last_stream_;
  // Ticket of the latest record in its task queue (0: already submitted).
  uint64_t record_ticket_ = 0;
};

}  // namespace c10_npu
