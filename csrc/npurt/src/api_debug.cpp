// Entry points: stream-destroy callbacks, task delay, trace, activity log.
#include <string>

#include "api_common.h"

using namespace npurt::internal;

static_assert(static_cast<int>(FaultKind::kLaunch) == npuFaultLaunch &&
              static_cast<int>(FaultKind::kTask) == npuFaultTask &&
              static_cast<int>(FaultKind::kCopy) == npuFaultCopy &&
              static_cast<int>(FaultKind::kAlloc) == npuFaultAlloc);

namespace {

// Upper bound of the task delay, as for NPU_SIM_TASK_DELAY_US.
constexpr uint32_t kMaxDelayUs = 10'000'000;

}  // namespace

extern "C" {

npuError_t npuRegisterStreamDestroyCallback(npuStreamDestroyCallback_t callback, void* userData,
                                            uint64_t* handle) {
  constexpr const char* kFn = "npuRegisterStreamDestroyCallback";
  return guarded(kFn, [&](Runtime& rt) {
    if (callback == nullptr) return nullArgument(kFn, "callback");
    if (handle == nullptr) return nullArgument(kFn, "handle");
    *handle = rt.addDestroyCallback(callback, userData);
    return npuSuccess;
  });
}

npuError_t npuUnregisterStreamDestroyCallback(uint64_t handle) {
  constexpr const char* kFn = "npuUnregisterStreamDestroyCallback";
  return guarded(kFn, [&](Runtime& rt) {
    if (!rt.removeDestroyCallback(handle)) {
      return fail(npuErrorInvalidValue, kFn,
                  "no stream-destroy callback registered as " + std::to_string(handle));
    }
    return npuSuccess;
  });
}

npuError_t npuSetFaultInjection(npuFaultKind kind, uint64_t nth) {
  constexpr const char* kFn = "npuSetFaultInjection";
  return guarded(kFn, [&](Runtime&) {
    const int rawKind = rawEnumValue(kind);  // any int may arrive from C
    if (rawKind < npuFaultLaunch || rawKind > npuFaultAlloc) {
      return fail(npuErrorInvalidValue, kFn, "unknown fault kind " + std::to_string(rawKind));
    }
    faults().arm(static_cast<FaultKind>(rawKind), nth);  // Note [Fault injection]
    return npuSuccess;
  });
}

npuError_t npuSetTaskDelay(uint32_t delayUs) {
  constexpr const char* kFn = "npuSetTaskDelay";
  return guarded(kFn, [&](Runtime& rt) {
    if (delayUs > kMaxDelayUs) {
      return fail(npuErrorInvalidValue, kFn,
                  "delayUs must be at most " + std::to_string(kMaxDelayUs) + ", got " +
                      std::to_string(delayUs));
    }
    // relaxed: the delay is read per task; no other data hangs off it.
    rt.globalDelayUs.store(delayUs, std::memory_order_relaxed);
    return npuSuccess;
  });
}

npuError_t npuGetTaskDelay(uint32_t* delayUs) {
  constexpr const char* kFn = "npuGetTaskDelay";
  return guarded(kFn, [&](Runtime& rt) {
    if (delayUs == nullptr) return nullArgument(kFn, "delayUs");
    *delayUs = rt.globalDelayUs.load(std::memory_order_relaxed);
    return npuSuccess;
  });
}

npuError_t npuTraceStart(void) {
  return guarded("npuTraceStart", [&](Runtime& rt) {
    rt.trace.start();
    return npuSuccess;
  });
}

npuError_t npuTraceStop(void) {
  return guarded("npuTraceStop", [&](Runtime& rt) {
    rt.trace.stop();
    return npuSuccess;
  });
}

npuError_t npuTraceWrite(const char* path) {
  constexpr const char* kFn = "npuTraceWrite";
  return guarded(kFn, [&](Runtime& rt) {
    if (path == nullptr) return nullArgument(kFn, "path");
    return rt.trace.write(path, kFn);
  });
}

npuError_t npuActivityEnable(void) {
  return guarded("npuActivityEnable", [&](Runtime& rt) {
    rt.trace.startActivities();
    return npuSuccess;
  });
}

npuError_t npuActivityDisable(void) {
  return guarded("npuActivityDisable", [&](Runtime& rt) {
    rt.trace.stopActivities();
    return npuSuccess;
  });
}

npuError_t npuActivityFlush(npuActivityCallback_t callback, void* userData) {
  constexpr const char* kFn = "npuActivityFlush";
  return guarded(kFn, [&](Runtime& rt) {
    if (callback == nullptr) return nullArgument(kFn, "callback");
    rt.trace.activities().flush(callback, userData);
    return npuSuccess;
  });
}

npuError_t npuActivityPushExternalCorrelationId(uint32_t id) {
  constexpr const char* kFn = "npuActivityPushExternalCorrelationId";
  return guarded(kFn, [&](Runtime&) {
    if (id == 0) return fail(npuErrorInvalidValue, kFn, "id must not be 0 (0 means none)");
    ActivityLog::pushExternalId(id);
    return npuSuccess;
  });
}

npuError_t npuActivityPopExternalCorrelationId(uint32_t* id) {
  constexpr const char* kFn = "npuActivityPopExternalCorrelationId";
  return guarded(kFn, [&](Runtime&) {
    if (!ActivityLog::popExternalId(id)) {
      return fail(npuErrorIllegalState, kFn,
                  "no external correlation id was pushed on this thread");
    }
    return npuSuccess;
  });
}

}  // extern "C"
