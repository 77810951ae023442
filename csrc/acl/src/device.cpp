// ACL initialisation, devices and the default ACL stream, over npurt.
//
// Note [The default ACL stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ACL functions take NULL for "the default stream of the current context".
// npurt has no implicit stream, so the ACL layer makes one npurt stream per
// device the first time NULL is passed on that device, and keeps it for the
// life of the process (aclrtDestroyStream refuses NULL). It is an ordinary
// stream: it does not synchronize with other streams, and it is not
// PyTorch's default stream (torch_npu's default stream is its own npurt
// stream; code that mixes both orders them with events, as on an NPU).
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl_common.h"

namespace acl {
namespace {

struct DefaultStreams {
  std::mutex mutex;
  std::vector<npuStream_t> perDevice;  // index: device; nullptr until made
};

DefaultStreams& defaultStreams() {
  // Leaked: npurt may still use the streams while the process exits.
  static auto* s = std::make_unique<DefaultStreams>().release();
  return *s;
}

std::mutex initMutex;
bool initialized = false;  // guarded by initMutex

}  // namespace

aclError resolveStream(aclrtStream stream, npuStream_t* out, const char* function) {
  if (stream != nullptr) {
    *out = static_cast<npuStream_t>(stream);
    return ACL_SUCCESS;
  }
  int device = 0;
  if (aclError e = check(npuGetDevice(&device), function)) return e;
  DefaultStreams& d = defaultStreams();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (d.perDevice.size() <= static_cast<size_t>(device)) d.perDevice.resize(device + 1, nullptr);
  if (d.perDevice[device] == nullptr) {
    npuStream_t s = nullptr;
    if (aclError e = check(npuStreamCreate(&s), function)) return e;
    d.perDevice[device] = s;
  }
  *out = d.perDevice[device];
  return ACL_SUCCESS;
}

}  // namespace acl

using acl::check;
using acl::fail;
using acl::guarded;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath) {
  return guarded("aclInit", [&]() -> aclError {
    if (configPath != nullptr && configPath[0] != '\0' && !std::ifstream(configPath).good()) {
      return fail(ACL_ERROR_INVALID_FILE, std::string("aclInit: cannot read the configuration file '") +
                                              configPath + "'; pass NULL or a readable file");
    }
    std::lock_guard<std::mutex> lock(acl::initMutex);
    if (acl::initialized) {
      return fail(ACL_ERROR_REPEAT_INITIALIZE,
                  "aclInit: ACL is already initialised (call aclFinalize first)");
    }
    acl::initialized = true;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclFinalize(void) {
  return guarded("aclFinalize", [&]() -> aclError {
    std::lock_guard<std::mutex> lock(acl::initMutex);
    if (!acl::initialized) {
      return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: ACL is not initialised (aclInit first)");
    }
    acl::initialized = false;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion,
                                             int32_t* patchVersion) {
  return guarded("aclrtGetVersion", [&]() -> aclError {
    if (!majorVersion || !minorVersion || !patchVersion) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: an output pointer is NULL");
    }
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId) {
  return guarded("aclrtSetDevice", [&] { return check(npuSetDevice(deviceId), "aclrtSetDevice"); });
}

ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId) {
  return guarded("aclrtGetDevice", [&]() -> aclError {
    if (deviceId == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    int device = 0;
    if (aclError e = check(npuGetDevice(&device), "aclrtGetDevice")) return e;
    *deviceId = device;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count) {
  return guarded("aclrtGetDeviceCount", [&]() -> aclError {
    if (count == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    int n = 0;
    if (aclError e = check(npuGetDeviceCount(&n), "aclrtGetDeviceCount")) return e;
    *count = static_cast<uint32_t>(n);
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceUtilizationRate(int32_t deviceId,
                                                           aclrtUtilizationInfo* utilizationInfo) {
  constexpr const char* kFn = "aclrtGetDeviceUtilizationRate";
  return guarded(kFn, [&]() -> aclError {
    if (utilizationInfo == nullptr) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceUtilizationRate: utilizationInfo is NULL");
    }
    unsigned percent = 0;
    if (aclError e = check(npuDeviceGetUtilization(deviceId, &percent), kFn)) return e;
    utilizationInfo->cubeUtilization = static_cast<int32_t>(percent);
    utilizationInfo->vectorUtilization = static_cast<int32_t>(percent);
    utilizationInfo->aicpuUtilization = -1;
    utilizationInfo->memoryUtilization = -1;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY const char* aclrtGetSocName(void) {
  // The configuration is read once and never changes, so neither does the
  // answer; kept in a static because callers keep the pointer.
  static const std::string name = [] {
    npuDeviceProp prop{};
    return npuGetDeviceProperties(&prop, 0) == npuSuccess ? std::string(prop.socName)
                                                           : std::string();
  }();
  return name.empty() ? nullptr : name.c_str();
}

ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOut(uint32_t timeout) {
  return guarded("aclrtSetOpExecuteTimeOut", [&] {
    return check(npuSetOpExecuteTimeout(uint64_t{timeout} * 1'000'000), "aclrtSetOpExecuteTimeOut");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t* actualTimeout) {
  return guarded("aclrtSetOpExecuteTimeOutV2", [&]() -> aclError {
    if (aclError e = check(npuSetOpExecuteTimeout(timeout), "aclrtSetOpExecuteTimeOutV2")) return e;
    if (actualTimeout != nullptr) *actualTimeout = timeout;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId) {
  return guarded("aclrtResetDevice", [&]() -> aclError {
    int previous = 0;
    if (aclError e = check(npuGetDevice(&previous), "aclrtResetDevice")) return e;
    if (aclError e = check(npuSetDevice(deviceId), "aclrtResetDevice")) return e;
    const aclError status = check(npuDeviceSynchronize(), "aclrtResetDevice");
    (void)npuSetDevice(previous);  // valid: it was current a moment ago
    return status;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void) {
  return guarded("aclrtSynchronizeDevice",
                 [&] { return check(npuDeviceSynchronize(), "aclrtSynchronizeDevice"); });
}

ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  return guarded("aclrtGetRunMode", [&]() -> aclError {
    if (runMode == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
  });
}

}  // extern "C"
