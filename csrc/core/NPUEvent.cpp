// See NPUEvent.h.
#include "core/NPUEvent.h"

#include <utility>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUTrace.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu {

NPUEvent::~NPUEvent() {
  if (event_ == nullptr) return;
  trace::eventDeleted(event_);  // Note [Trace hooks]
  queue::destroyEvent(event_);
}

void NPUEvent::moveFrom(NPUEvent& other) noexcept {
  flags_ = other.flags_;
  device_index_ = std::exchange(other.device_index_, -1);
  event_ = std::exchange(other.event_, nullptr);
  was_recorded_ = std::exchange(other.was_recorded_, false);
  last_stream_ = std::exchange(other.last_stream_, std::nullopt);
  record_ticket_ = std::exchange(other.record_ticket_, 0);
}

NPUEvent::NPUEvent(NPUEvent&& other) noexcept { moveFrom(other); }

NPUEvent& NPUEvent::operator=(NPUEvent&& other) noexcept {
  if (this != &other) {
    NPUEvent dying(std::move(*this));  // destroys our old event on scope exit
    moveFrom(other);
  }
  return *this;
}

std::optional<c10::Device> NPUEvent::device() const {
  if (!isCreated()) return std::nullopt;
  return c10::Device(c10::DeviceType::PrivateUse1, device_index_);
}

void NPUEvent::createEvent(c10::DeviceIndex device) {
  npurt::DeviceGuard guard(device);
  NPU_CHECK(npuEventCreateWithFlags(&event_, flags_));
  device_index_ = device;
  trace::eventCreated(event_);  // Note [Trace hooks]
}

bool NPUEvent::query() const {
  if (!isCreated() || !was_recorded_) return true;
  // A record still in the task queue cannot have completed: answer without
  // draining (query is polled; a drain per poll would wait for the consumer).
  if (last_stream_.has_value() && !queue::submitted(*last_stream_, record_ticket_)) return false;
  const npuError_t status = npuEventQuery(event_);
  if (status == npuErrorNotReady) return false;
  NPU_CHECK(status);
  return true;
}

void NPUEvent::record() { record(getCurrentNPUStream(isCreated() ? device_index_ : -1)); }

void NPUEvent::recordOnce(const NPUStream& stream) {
  if (!was_recorded_) record(stream);
}

void NPUEvent::record(const NPUStream& stream) {
  external::checkManagedOnly(stream, "NPUEvent::record");
  if (!isCreated()) createEvent(stream.device_index());
  TORCH_CHECK(device_index_ == stream.device_index(), "Event device ",
              static_cast<int>(device_index_), " does not match recording stream's device ",
              static_cast<int>(stream.device_index()), ".", NPU_ERROR_SUFFIX);
  record_ticket_ = queue::recordEvent(stream, event_);
  was_recorded_ = true;
  last_stream_ = stream;
  trace::eventRecorded(event_, stream);
}

void NPUEvent::block(const NPUStream& stream) {
  external::checkManagedOnly(stream, "NPUEvent::block");
  if (!isCreated() || !was_recorded_) return;
  // If the record travels through another queue than the wait, the wait
  // could reach the runtime first and bind to an older version (a missed
  // dependency). Drain the record's queue first. Same queue: FIFO suffices.
  if (last_stream_.has_value() &&
      queue::queueIdentity(*last_stream_) != queue::queueIdentity(stream)) {
    queue::drain(*last_stream_);
  }
  queue::waitEvent(stream, event_);
  trace::eventWaited(event_, stream);
}

void NPUEvent::synchronize() const {
  if (!isCreated() || !was_recorded_) return;
  if (last_stream_.has_value()) queue::drain(*last_stream_);
  NPU_CHECK(npuEventSynchronize(event_));
  trace::eventSynchronized(event_);
}

float NPUEvent::elapsed_time(const NPUEvent& other) const {
  TORCH_CHECK(!(flags_ & npuEventDisableTiming) && !(other.flags_ & npuEventDisableTiming),
              "Both events must be created with argument 'enable_timing=True'.", NPU_ERROR_SUFFIX);
  TORCH_CHECK(was_recorded_ && other.was_recorded_,
              "Both events must be recorded before calculating elapsed time.", NPU_ERROR_SUFFIX);
  // Devices have no common clock on hardware (aclrtEventElapsedTime and
  // cudaEventElapsedTime refuse such a pair), so neither does the simulator,
  // although its timestamps would allow it: code must not come to rely on it.
  TORCH_CHECK(device_index_ == other.device_index_,
              "Both events must be recorded on the same device to calculate elapsed time, but "
              "got npu:",
              static_cast<int>(device_index_), " and npu:", static_cast<int>(other.device_index_),
              ".", NPU_ERROR_SUFFIX);
  synchronize();
  other.synchronize();
  float ms = 0.0f;
  NPU_CHECK(npuEventElapsedTime(&ms, event_, other.event_));
  return ms;
}

uint64_t NPUEvent::recorded_time() const {
  TORCH_CHECK(was_recorded_, "Event must be recorded before getting recorded timestamp.",
              NPU_ERROR_SUFFIX);
  synchronize();
  uint64_t ns = 0;
  NPU_CHECK(npuEventGetTimestamp(event_, &ns));
  return ns / 1000;
}

}  // namespace c10_npu
