// Status mapping and the per-thread error message of the ACL layer.
#include <string>

#include "acl_common.h"

namespace acl {
namespace {
thread_local std::string lastError;
}  // namespace

aclError fromNpu(npuError_t status) {
  switch (status) {
    case npuSuccess: return ACL_SUCCESS;
    case npuErrorInvalidValue: return ACL_ERROR_RT_PARAM_INVALID;
    case npuErrorMemoryAllocation: return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case npuErrorInitializationError: return ACL_ERROR_UNINITIALIZE;
    case npuErrorInvalidDevice: return ACL_ERROR_RT_INVALID_DEVICEID;
    case npuErrorInvalidResourceHandle: return ACL_ERROR_RT_INVALID_HANDLE;
    case npuErrorInvalidDevicePointer: return ACL_ERROR_RT_PARAM_INVALID;
    case npuErrorNotReady: return ACL_ERROR_RT_STREAM_NOT_COMPLETE;
    case npuErrorTimeout: return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
    // A task that failed on the device is what a kernel exception is on an
    // Ascend NPU.
    case npuErrorLaunchFailure: return ACL_ERROR_RT_AICORE_EXCEPTION;
    case npuErrorInvalidMemcpyDirection: return ACL_ERROR_RT_PARAM_INVALID;
    case npuErrorTimingDisabled: return ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
    case npuErrorEventNotRecorded: return ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
    case npuErrorHostMemoryAlreadyRegistered: return ACL_ERROR_RT_PARAM_INVALID;
    case npuErrorHostMemoryNotRegistered: return ACL_ERROR_RT_PARAM_INVALID;
    case npuErrorRuntimeShutdown: return ACL_ERROR_RT_INTERNAL_ERROR;
    case npuErrorNotSupported: return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    case npuErrorStreamCaptureUnsupported: return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    case npuErrorStreamCaptureInvalidated: return ACL_ERROR_RT_CAPTURE_DEPENDENCY;
    case npuErrorStreamCaptureUnjoined: return ACL_ERROR_RT_STREAM_UNJOINED;
    case npuErrorStreamCaptureWrongThread: return ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
    case npuErrorStreamCaptureIsolation: return ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT;
    case npuErrorCapturedEvent: return ACL_ERROR_RT_EVENT_CAPTURED;
    case npuErrorIllegalState: return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
    case npuErrorStreamCaptureUnmatched: return ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED;
    case npuErrorGraphExecUpdateFailure: return ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP;
    case npuErrorUnknown: return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  return ACL_ERROR_RT_INTERNAL_ERROR;
}

aclError fail(aclError status, const std::string& message) {
  lastError = message;
  return status;
}

aclError check(npuError_t status, const char* function) {
  if (status == npuSuccess) return ACL_SUCCESS;
  return fail(fromNpu(status), std::string(function) + ": " + npuGetErrorName(status) + ": " +
                                   npuGetLastErrorMessage());
}

void clearError() { lastError.clear(); }

}  // namespace acl

extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) {
  return acl::lastError.c_str();
}
