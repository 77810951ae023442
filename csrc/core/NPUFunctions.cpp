// See NPUFunctions.h.
#include "core/NPUFunctions.h"

#include <pthread.h>

#include <atomic>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/NPUStream.h"
#include "core/NPUTrace.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu {
namespace {

// Set in every forked child; whether the child is a *bad* fork is npurt's to
// say (it knows whether the parent had initialised it). See Note [Fork].
std::atomic<bool> gForked{false};

const bool gAtforkRegistered = [] {
  return pthread_atfork(nullptr, nullptr, [] { gForked.store(true, std::memory_order_relaxed); }) ==
         0;
}();

}  // namespace

bool inBadFork() noexcept {
  if (!gForked.load(std::memory_order_relaxed)) return false;
  int bad = 0;
  return npuGetForkState(&bad) == npuSuccess && bad != 0;
}

void checkNotInBadFork() { TORCH_CHECK(!inBadFork(), kBadForkMessage, NPU_ERROR_SUFFIX); }

std::string formatRuntimeError(const char* expr, npuError_t status) {
  if (status == npuErrorInitializationError && inBadFork()) return kBadForkMessage;
  std::string message = expr;
  message += " failed: ";
  message += npuGetErrorName(status);
  const char* detail = npuGetLastErrorMessage();
  message += ": ";
  message += (detail != nullptr && detail[0] != '\0') ? detail : npuGetErrorString(status);
  return message;
}

c10::DeviceIndex device_count() noexcept {
  int count = 0;
  if (npuGetDeviceCount(&count) != npuSuccess) return 0;
  return static_cast<c10::DeviceIndex>(count);
}

c10::DeviceIndex device_count_ensure_non_zero() {
  // Every stream lookup checks its device index against the count, and the
  // runtime fixes the count when it starts (Note [Device count before
  // initialisation] in csrc/npurt/README.md): remember the first good answer.
  static std::atomic<int> known{0};
  int count = known.load(std::memory_order_relaxed);
  if (count > 0) return static_cast<c10::DeviceIndex>(count);
  NPU_CHECK(npuGetDeviceCount(&count));
  TORCH_CHECK(count > 0, "No NPU devices are available", NPU_ERROR_SUFFIX);
  known.store(count, std::memory_order_relaxed);
  return static_cast<c10::DeviceIndex>(count);
}

c10::DeviceIndex current_device() {
  int device = 0;
  NPU_CHECK(npuGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void set_device(c10::DeviceIndex device) { NPU_CHECK(npuSetDevice(checkedDeviceIndex(device))); }

c10::DeviceIndex exchange_device(c10::DeviceIndex device) {
  c10::DeviceIndex previous = current_device();
  if (device != previous) set_device(device);
  return previous;
}

void waitForHostRead(const NPUStream& stream) {
  if (stream.isExternal() && external::mode() == external::Mode::kCompat) {
    device_synchronize(stream.device_index());
  } else {
    stream.synchronize();
  }
}

void device_synchronize(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  queue::drainDevice(device);
  npurt::DeviceGuard guard(device);
  NPU_CHECK(npuDeviceSynchronize());
  trace::deviceSynchronized();  // Note [Trace hooks]
}

}  // namespace c10_npu
