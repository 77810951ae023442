// ACL streams over npurt streams: an aclrtStream is the npuStream_t value.
#include <string>

#include "acl/acl_rt.h"
#include "acl_common.h"

using acl::check;
using acl::fail;
using acl::guarded;
using acl::resolveStream;

namespace {

constexpr uint32_t kKnownStreamFlags =
    ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT | ACL_STREAM_HUGE;
constexpr uint32_t kLowestStreamPriority = 7;  // ACL: 0 (highest) .. 7

}  // namespace

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream) {
  return aclrtCreateStreamWithConfig(stream, 0, 0);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority,
                                                         uint32_t flag) {
  return guarded("aclrtCreateStreamWithConfig", [&]() -> aclError {
    if (stream == nullptr) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    }
    if (priority > kLowestStreamPriority) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: priority " +
                                               std::to_string(priority) + " is outside [0, 7]");
    }
    if ((flag & ~kKnownStreamFlags) != 0) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: unknown flag bits " +
                                               std::to_string(flag & ~kKnownStreamFlags) +
                                               " (known: ACL_STREAM_FAST_LAUNCH, _FAST_SYNC, "
                                               "_PERSISTENT, _HUGE)");
    }
    npuStream_t s = nullptr;
    if (aclError e = check(npuStreamCreate(&s), "aclrtCreateStream")) return e;
    *stream = s;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream) {
  return guarded("aclrtDestroyStream", [&]() -> aclError {
    if (stream == nullptr) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtDestroyStream: stream is NULL (the default stream cannot be destroyed)");
    }
    return check(npuStreamDestroy(static_cast<npuStream_t>(stream)), "aclrtDestroyStream");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream) {
  return guarded("aclrtSynchronizeStream", [&]() -> aclError {
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtSynchronizeStream")) return e;
    return check(npuStreamSynchronize(s), "aclrtSynchronizeStream");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  return guarded("aclrtSynchronizeStreamWithTimeout", [&]() -> aclError {
    if (timeout < -1) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStreamWithTimeout: timeout " +
                                               std::to_string(timeout) +
                                               " ms is invalid (-1 waits forever, else >= 0)");
    }
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtSynchronizeStreamWithTimeout")) return e;
    const npuError_t status = timeout == -1
                                  ? npuStreamSynchronize(s)
                                  : npuStreamSynchronizeWithTimeout(s, int64_t{timeout} * 1000);
    return check(status, "aclrtSynchronizeStreamWithTimeout");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  return guarded("aclrtStreamQuery", [&]() -> aclError {
    if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtStreamQuery")) return e;
    const npuError_t query = npuStreamQuery(s);
    if (query == npuErrorNotReady) {
      *status = ACL_STREAM_STATUS_NOT_READY;
      return ACL_SUCCESS;
    }
    if (aclError e = check(query, "aclrtStreamQuery")) return e;
    *status = ACL_STREAM_STATUS_COMPLETE;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return guarded("aclrtStreamWaitEvent", [&]() -> aclError {
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtStreamWaitEvent")) return e;
    return check(npuStreamWaitEvent(s, static_cast<npuEvent_t>(event), 0), "aclrtStreamWaitEvent");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
  return guarded("aclrtLaunchHostFunc", [&]() -> aclError {
    if (fn == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchHostFunc: fn is NULL");
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtLaunchHostFunc")) return e;
    return check(npuLaunchHostFunc(s, fn, args), "aclrtLaunchHostFunc");
  });
}

}  // extern "C"
