// The legacy profiler's PrivateUse1 stubs (torch::profiler::impl::
// ProfilerStubs): what profile(use_device="npu") without Kineto uses to time
// each operator on the device. As CUDA's stubs do with cudaEvents, record()
// puts a timed NPUEvent on the current stream, ordered with the op's work
// through the task queue, and elapsed() measures between two of them.
//
// Layer: profiler. Thread safety: every member is thread-safe (each call
// uses its own events; the streams are the calling thread's).
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

#include "core/NPUEvent.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"

namespace c10_npu::profiler {
namespace {

struct NPUProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpuNs) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    auto npuEvent = std::make_shared<NPUEvent>(npuEventDefault);
    if (cpuNs != nullptr) *cpuNs = c10::getTime();
    npuEvent->record(getCurrentNPUStream(index));
    *event = std::move(npuEvent);
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event1,
                const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    const auto* start = static_cast<const NPUEvent*>(event1->get());
    const auto* end = static_cast<const NPUEvent*>(event2->get());
    end->synchronize();
    // The legacy profiler wants microseconds; elapsed_time is in ms.
    return start->elapsed_time(*end) * 1000.0f;
  }

  // No device-side markers or ranges exist on the simulator (CUDA's are
  // NVTX, for external tools); the profiler calls these only with
  // emit_nvtx-like modes, which have nothing to emit to.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, d));
      op(d);
    }
  }

  void synchronize() const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) device_synchronize(d);
  }
};

// Registered at load, as torch_npu does; the registry keeps the pointer.
const bool kRegistered = [] {
  static NPUProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace c10_npu::profiler
