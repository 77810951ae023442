// See NPUExternalEvent.h and Note [External event gates].
#include "core/NPUExternalEvent.h"

#include <array>
#include <atomic>
#include <memory>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.hpp"

namespace c10_npu {

namespace {

constexpr int kMaxDevices = 32;

// Gates not opened yet, per device (for tests: pendingGates()).
std::array<std::atomic<int>, kMaxDevices>& gateCounts() {
  static auto* counts = new std::array<std::atomic<int>, kMaxDevices>();  // leaked: see TaskQueue
  return *counts;
}

}  // namespace

// A wait issued before its record (Note [External event gates]): a deferred
// version of a private runtime event, which the waiting stream waits on.
// Opening the gate completes that version, once.
struct NPUExternalEvent::Gate {
  npuDeferredRecord_t record = nullptr;  // set once armed
  int device = 0;
  std::atomic<bool> opened{false};

  void openGate() {
    if (record == nullptr || opened.exchange(true)) return;
    // Counted off first: whoever sees the waiting stream resume sees the
    // count without this gate.
    gateCounts()[device].fetch_sub(1);
    // Fails only in a forked child, where nothing is parked to wake.
    (void)npuEventCompleteDeferred(record);
  }
};

namespace {

using GatePtr = std::shared_ptr<NPUExternalEvent::Gate>;

// The task a record launches on the recording stream: opens the gate when it
// runs — and also when it is discarded (stream in failure state, process
// exit), so a waiting stream is never left parked forever.
int runOpenTask(void* /*user*/, char* /*errorBuf*/, size_t /*errorBufSize*/) { return 0; }

void releaseOpenTask(void* user) {
  const std::unique_ptr<GatePtr> gate(static_cast<GatePtr*>(user));
  (*gate)->openGate();
}

[[noreturn]] void raiseSecondWait() {
  TORCH_CHECK(false,
              "External event: A single record operation cannot be associated with multiple "
              "wait operations.",
              NPU_ERROR_SUFFIX);
}

}  // namespace

NPUExternalEvent::~NPUExternalEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pendingGate_) pendingGate_->openGate();  // see the note: never park a stream forever
}

int NPUExternalEvent::pendingGates(c10::DeviceIndex device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  return gateCounts()[device].load();
}

void NPUExternalEvent::record(const NPUStream& stream) {
  external::checkManagedOnly(stream, "NPUEvent::record");
  std::lock_guard<std::mutex> lock(mutex_);
  if (pendingGate_) {
    npuTask task{};
    task.name = "external event record";
    task.run = &runOpenTask;
    task.release = &releaseOpenTask;
    task.flags = npuTaskNotReplayable;  // opens one gate, once
    task.userData = std::make_unique<GatePtr>(pendingGate_).release();
    queue::launch(stream, task);  // owns userData in every case
    pendingGate_.reset();
    available_ = false;  // consumed by the wait that came first
  } else {
    event_.record(stream);
    available_ = true;
  }
  waited_ = false;
}

void NPUExternalEvent::wait(const NPUStream& stream) {
  external::checkManagedOnly(stream, "NPUEvent::block");
  std::lock_guard<std::mutex> lock(mutex_);
  if (waited_) raiseSecondWait();
  if (available_) {
    event_.block(stream);
    available_ = false;
    waited_ = true;
    return;
  }
  // Note [External events in a capture]: a wait before any record, issued on
  // a capturing stream, has nothing to wait for. A gate would block a core
  // (a deferred version) outside the capture, and the capture would wait on work outside it
  // (npuErrorStreamCaptureIsolation); torch_npu's update pattern (wait and
  // reset in the capture, record after graph_task_update_end) needs no edge,
  // because the update takes effect on the host, in program order (Note
  // [Task-group updates]).
  if (graphs::anyCapture() && graphs::isCapturing(stream)) return;
  // Wait before record: build a gate. See Note [External event gates].
  const c10::DeviceIndex device = stream.device_index();
  auto gate = std::make_shared<Gate>();
  gate->device = static_cast<int>(device);
  npuEvent_t gateEvent = nullptr;
  try {
    npurt::DeviceGuard guard(device);
    NPU_CHECK(npuEventCreateWithFlags(&gateEvent, npuEventDisableTiming));
    NPU_CHECK(npuEventRecordDeferred(gateEvent, &gate->record));
    gateCounts()[device].fetch_add(1);
    // The queued wait binds to the deferred version: the only version the
    // private event ever has.
    queue::waitEvent(stream, gateEvent);
  } catch (...) {
    gate->openGate();
    if (gateEvent != nullptr) (void)npuEventDestroy(gateEvent);
    throw;
  }
  queue::destroyEvent(gateEvent);  // after everything queued so far; the bound wait still resolves
  pendingGate_ = std::move(gate);
  waited_ = true;
}

void NPUExternalEvent::reset(const NPUStream& stream) {
  (void)stream;
  std::lock_guard<std::mutex> lock(mutex_);
  available_ = false;
  waited_ = false;
}

npuEvent_t NPUExternalEvent::event() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return event_.event();
}

std::optional<c10::Device> NPUExternalEvent::device() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return event_.device();
}

}  // namespace c10_npu
