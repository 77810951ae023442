// See NPUExternalEvent.h and Note [External event gates].
#include "core/NPUExternalEvent.h"

#include <array>
#include <atomic>
#include <condition_variable>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.hpp"

namespace c10_npu {

struct NPUExternalEvent::Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;  // guarded by mutex

  void openGate() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
  void waitOpen() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return open; });
  }
};

namespace {

constexpr int kMaxDevices = 32;

// Gates waiting (queued or blocking) per device. See Note [External event
// gates] for the budget. Relaxed is not enough for the budget check: use the
// default (seq_cst) compare-exchange so two threads cannot both take the last
// slot.
std::array<std::atomic<int>, kMaxDevices>& gateCounts() {
  static auto* counts = new std::array<std::atomic<int>, kMaxDevices>();  // leaked: see TaskQueue
  return *counts;
}

using GatePtr = std::shared_ptr<NPUExternalEvent::Gate>;

// The blocking task on the gate stream. Its release (called exactly once,
// after run or instead of it) returns the budget slot.
struct GateTask {
  GatePtr gate;
  int device;
};

int runGateTask(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  static_cast<GateTask*>(user)->gate->waitOpen();
  return 0;
}

void releaseGateTask(void* user) {
  auto* t = static_cast<GateTask*>(user);
  gateCounts()[t->device].fetch_sub(1);
  delete t;
}

// The task a record launches on the recording stream: opens the gate when it
// runs — and also when it is discarded (stream in failure state, process
// exit), so a waiting stream is never left blocked forever.
int runOpenTask(void* /*user*/, char* /*errorBuf*/, size_t /*errorBufSize*/) { return 0; }

void releaseOpenTask(void* user) {
  auto* g = static_cast<GatePtr*>(user);
  (*g)->openGate();
  delete g;
}

int coreCount(c10::DeviceIndex device) {
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device));
  return prop.coreCount;
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
  if (pendingGate_) pendingGate_->openGate();  // see the note: never hold a core forever
  for (auto& [device, stream] : gateStreams_) (void)npuStreamDestroy(stream);
}

int NPUExternalEvent::pendingGates(c10::DeviceIndex device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  return gateCounts()[device].load();
}

npuStream_t NPUExternalEvent::gateStream(c10::DeviceIndex device) {
  for (auto& [d, s] : gateStreams_) {
    if (d == device) return s;
  }
  npurt::DeviceGuard guard(device);
  npuStream_t s = nullptr;
  NPU_CHECK(npuStreamCreateWithFlags(&s, npuStreamNonBlocking));
  // The gate's tasks are bookkeeping, not work: never delay them.
  (void)npuStreamSetTaskDelay(s, 0);
  gateStreams_.emplace_back(device, s);
  return s;
}

void NPUExternalEvent::record(const NPUStream& stream) {
  external::checkManagedOnly(stream, "NPUEvent::record");
  std::lock_guard<std::mutex> lock(mutex_);
  if (pendingGate_) {
    npuTask task{};
    task.name = "external event record";
    task.run = &runOpenTask;
    task.release = &releaseOpenTask;
    task.userData = new GatePtr(pendingGate_);
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
  // now, outside the capture, and the capture would wait on work outside it
  // (npuErrorStreamCaptureIsolation); torch_npu's update pattern (wait and
  // reset in the capture, record after graph_task_update_end) needs no edge,
  // because the update takes effect on the host, in program order (Note
  // [Task-group updates]).
  if (graphs::anyCapture() && graphs::isCapturing(stream)) return;
  // Wait before record: build a gate. See Note [External event gates].
  const c10::DeviceIndex device = stream.device_index();
  const int budget = coreCount(device) - 1;
  auto& count = gateCounts()[device];
  int current = count.load();
  do {
    TORCH_CHECK(current < budget, "ExternalEvent.wait() before its record() blocks one executor core of npu:",
                static_cast<int>(device), " until the record runs; npu:", static_cast<int>(device),
                " has ", budget + 1, " cores (NPU_SIM_CORES) and ", current,
                " such wait(s) already pending, so another one could deadlock the device. Record "
                "the event before waiting on it, or raise NPU_SIM_CORES.",
                NPU_ERROR_SUFFIX);
  } while (!count.compare_exchange_weak(current, current + 1));

  auto gate = std::make_shared<Gate>();
  npuStream_t gs = nullptr;
  try {
    gs = gateStream(device);
  } catch (...) {
    count.fetch_sub(1);
    throw;
  }
  auto* gateTask = new GateTask{gate, static_cast<int>(device)};
  npuTask task{};
  task.name = "external event gate";
  task.run = &runGateTask;
  task.release = &releaseGateTask;
  task.userData = gateTask;
  const npuError_t launched = npuLaunchTask(gs, &task);
  if (launched != npuSuccess) {
    releaseGateTask(gateTask);  // npuLaunchTask does not release on error
    NPU_CHECK(launched);
  }
  npuEvent_t gateEvent = nullptr;
  try {
    npurt::DeviceGuard guard(device);
    NPU_CHECK(npuEventCreateWithFlags(&gateEvent, npuEventDisableTiming));
    NPU_CHECK(npuEventRecord(gateEvent, gs));
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
