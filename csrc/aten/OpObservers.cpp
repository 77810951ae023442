#include "aten/OpObservers.h"

#include "core/NPUStream.h"
#include "core/logging/LogContext.h"

namespace c10_npu::aten::detail {

constinit std::atomic<uint32_t> gOpObservers{0};

void setOpObserver(OpObserver which, bool on) noexcept {
  if (on) {
    gOpObservers.fetch_or(which, std::memory_order_relaxed);
  } else {
    gOpObservers.fetch_and(~static_cast<uint32_t>(which), std::memory_order_relaxed);
  }
}

namespace {

using npu_logging::LoggingLevel;

const std::shared_ptr<npu_logging::Logger> kDispatchLogger =
    npu_logging::logging().getLogger("torch_npu.dispatch");
const std::shared_ptr<npu_logging::Logger> kDispatchTimeLogger =
    npu_logging::logging().getLogger("torch_npu.dispatch.time");

// The loggers' bits of gOpObservers follow their levels (Note [Op observers]).
void followLoggerLevels() {
  setOpObserver(kDispatchLog, kDispatchLogger->isEnabledFor(LoggingLevel::DEBUG));
  setOpObserver(kDispatchTimeLog, kDispatchTimeLogger->isEnabledFor(LoggingLevel::INFO));
}

[[maybe_unused]] const bool kFollowing = [] {
  npu_logging::logging().addLevelListener(&followLoggerLevels);
  followLoggerLevels();
  return true;
}();

}  // namespace

void logOpPath(uint32_t observers, const char* name, bool async, c10::DeviceIndex device) {
  if ((observers & kDispatchLog) == 0) return;
  const NPUStream stream = getCurrentNPUStream(device);
  if (async) {
    TORCH_NPU_LOGD(kDispatchLogger, "Op %s: asynchronous path, queued on stream %lld of npu:%d",
                   name, static_cast<long long>(stream.id()), static_cast<int>(device));
  } else {
    TORCH_NPU_LOGD(kDispatchLogger,
                   "Op %s: synchronous path, the host waited for stream %lld of npu:%d", name,
                   static_cast<long long>(stream.id()), static_cast<int>(device));
  }
}

void logOpTime(uint32_t observers, const char* name, int64_t nanoseconds) {
  if ((observers & kDispatchTimeLog) == 0) return;
  TORCH_NPU_LOGI(kDispatchTimeLogger, "Op %s: enQueue duration is (ns): %lld", name,
                 static_cast<long long>(nanoseconds));
}

}  // namespace c10_npu::aten::detail
