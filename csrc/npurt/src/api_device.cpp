// Entry points: status names, devices, device synchronize, clock.
#include <cstdio>
#include <string>
#include <vector>

#include "api_common.h"
#include "config.h"
#include "executor.h"
#include "graph/capture.h"

using namespace npurt::internal;

namespace {

// npuErrorInvalidDevice for `device`, naming the valid range.
npuError_t invalidDevice(const char* function, Runtime& rt, int device) {
  return fail(npuErrorInvalidDevice, function,
              "device " + std::to_string(device) + " is not in [0, " +
                  std::to_string(rt.deviceCount()) + ")");
}

}  // namespace

extern "C" {

const char* npuGetErrorName(npuError_t error) { return errorName(error); }

const char* npuGetErrorString(npuError_t error) { return errorString(error); }

const char* npuGetLastErrorMessage(void) { return lastErrorMessage(); }

uint64_t npuGetTimestampNs(void) { return nowNs(); }

npuError_t npuGetForkState(int* inForkedChild) {
  // Not guarded(): it must answer in a forked child, where every guarded
  // call fails, and it must not build the runtime (Note [Fork]).
  if (inForkedChild == nullptr) {
    return fail(npuErrorInvalidValue, "npuGetForkState", "inForkedChild is NULL");
  }
  *inForkedChild = inBadFork() ? 1 : 0;
  return npuSuccess;
}

npuError_t npuGetDeviceCount(int* count) {
  constexpr const char* kFn = "npuGetDeviceCount";
  return guarded(kFn, [&](Runtime& rt) {
    if (count == nullptr) return nullArgument(kFn, "count");
    *count = rt.deviceCount();
    return npuSuccess;
  });
}

npuError_t npuProbeDeviceCount(int* count) {
  constexpr const char* kFn = "npuProbeDeviceCount";
  // Note [Device count before initialisation] (csrc/npurt/README.md): the
  // environment is read afresh until the runtime reads it once and for all.
  if (runtimeStarted()) return npuGetDeviceCount(count);
  try {
    if (count == nullptr) return nullArgument(kFn, "count");
    Config config;
    const std::string error = loadConfig(config);
    if (!error.empty()) return fail(npuErrorInitializationError, kFn, error);
    *count = config.deviceCount;
    return npuSuccess;
  } catch (const std::bad_alloc&) {
    return fail(npuErrorMemoryAllocation, kFn, "host memory allocation failed");
  }
}

npuError_t npuSetOpExecuteTimeout(uint64_t timeoutUs) {
  return guarded("npuSetOpExecuteTimeout", [&](Runtime&) {
    setOpExecuteTimeoutUs(timeoutUs);
    return npuSuccess;
  });
}

npuError_t npuGetOpExecuteTimeout(uint64_t* timeoutUs) {
  constexpr const char* kFn = "npuGetOpExecuteTimeout";
  return guarded(kFn, [&](Runtime&) {
    if (timeoutUs == nullptr) return nullArgument(kFn, "timeoutUs");
    *timeoutUs = opExecuteTimeoutUs();
    return npuSuccess;
  });
}

npuError_t npuSetDevice(int device) {
  constexpr const char* kFn = "npuSetDevice";
  return guarded(kFn, [&](Runtime& rt) {
    if (!rt.validDevice(device)) return invalidDevice(kFn, rt, device);
    Runtime::currentDevice() = device;
    return npuSuccess;
  });
}

npuError_t npuGetDevice(int* device) {
  constexpr const char* kFn = "npuGetDevice";
  return guarded(kFn, [&](Runtime&) {
    if (device == nullptr) return nullArgument(kFn, "device");
    *device = Runtime::currentDevice();
    return npuSuccess;
  });
}

npuError_t npuDeviceSynchronize(void) {
  constexpr const char* kFn = "npuDeviceSynchronize";
  return guarded(kFn, [&](Runtime& rt) {
    // Note [Stream capture]: refused while a capture forbids unsafe calls
    // (captured work is not enqueued, so this would not wait for it).
    if (const npuError_t s = checkUnsafeCall(kFn); s != npuSuccess) return s;
    Device& device = rt.device(Runtime::currentDevice());
    // A snapshot: streams created after this call are not waited for, as
    // work enqueued after it is not. Every stream's ticket count is taken
    // before waiting for any of them (Note [Stream scheduling rule]).
    const std::vector<std::shared_ptr<Stream>> streams = device.streams();
    std::vector<uint64_t> targets;
    targets.reserve(streams.size());
    for (const std::shared_ptr<Stream>& stream : streams) targets.push_back(stream->enqueued());
    for (size_t i = 0; i < streams.size(); ++i) streams[i]->waitFinished(targets[i], -1);
    if (racecheck::enabled()) [[unlikely]]
      racecheck::hostSawDevice(Runtime::currentDevice());  // Note [Happens-before model]
    // Report the earliest unreported failure (Note [Task failure rule]); a
    // concurrent query may take it first, then look again.
    for (;;) {
      Stream* first = nullptr;
      uint64_t firstSequence = UINT64_MAX;
      for (const std::shared_ptr<Stream>& stream : streams) {
        const uint64_t sequence = stream->failureSequence();
        if (sequence < firstSequence) {
          firstSequence = sequence;
          first = stream.get();
        }
      }
      if (first == nullptr) break;
      std::string message;
      if (first->takeFailure(message)) {
        device.prune();
        return fail(npuErrorLaunchFailure, kFn, message);
      }
    }
    device.prune();
    return npuSuccess;
  });
}

npuError_t npuGetDeviceProperties(npuDeviceProp* prop, int device) {
  constexpr const char* kFn = "npuGetDeviceProperties";
  return guarded(kFn, [&](Runtime& rt) {
    if (prop == nullptr) return nullArgument(kFn, "prop");
    if (!rt.validDevice(device)) return invalidDevice(kFn, rt, device);
    Device& d = rt.device(device);
    *prop = npuDeviceProp{};
    // The simulated device's own ordinal, as nvidia-smi names GPUs whatever
    // CUDA_VISIBLE_DEVICES says (Note [Visible devices]).
    // With a chip model every device is named after it, as CANN names
    // devices by their chip (Note [Simulated chip model]).
    const std::string& soc = rt.config().socName;
    std::snprintf(prop->socName, sizeof prop->socName, "%s", soc.c_str());
    if (soc.empty()) {
      std::snprintf(prop->name, sizeof prop->name, "NPU-SIM-%d",
                    rt.config().physicalDevice[static_cast<size_t>(device)]);
    } else {
      std::snprintf(prop->name, sizeof prop->name, "%s", soc.c_str());
    }
    prop->index = device;
    prop->coreCount = d.executor().cores();
    prop->totalMemory = d.capacity();
    const size_t used = d.used();
    prop->freeMemory = used < d.capacity() ? d.capacity() - used : 0;
    return npuSuccess;
  });
}

npuError_t npuMemGetInfo(size_t* free, size_t* total) {
  constexpr const char* kFn = "npuMemGetInfo";
  return guarded(kFn, [&](Runtime& rt) {
    if (free == nullptr) return nullArgument(kFn, "free");
    if (total == nullptr) return nullArgument(kFn, "total");
    Device& d = rt.device(Runtime::currentDevice());
    const size_t used = d.used();
    *total = d.capacity();
    *free = used < d.capacity() ? d.capacity() - used : 0;
    return npuSuccess;
  });
}

npuError_t npuDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  // Either pointer may be NULL, as in CUDA.
  return guarded("npuDeviceGetStreamPriorityRange", [&](Runtime&) {
    if (leastPriority != nullptr) *leastPriority = kLeastPriority;
    if (greatestPriority != nullptr) *greatestPriority = kGreatestPriority;
    return npuSuccess;
  });
}

npuError_t npuDeviceGetUtilization(int device, unsigned int* percent) {
  constexpr const char* kFn = "npuDeviceGetUtilization";
  return guarded(kFn, [&](Runtime& rt) {
    if (percent == nullptr) return nullArgument(kFn, "percent");
    if (!rt.validDevice(device)) return invalidDevice(kFn, rt, device);
    *percent = rt.device(device).executor().utilizationPercent();
    return npuSuccess;
  });
}

}  // extern "C"
