/*
 * ACL-compatible runtime API of the simulated NPU: base types and status
 * codes. Layer: beside npurt (csrc/acl/, over npurt's C API; no torch).
 *
 * The names, types and numeric values are ACL's (CANN's acl_base.h and
 * rt_error_codes.h), so code written for Ascend compiles unchanged and
 * compares against the same numbers. Only the subset that stream code uses
 * exists; docs/ACL.md lists it. An aclrtStream *is* an npurt stream
 * (npuStream_t) and an aclrtEvent an npurt event, so a handle can be passed
 * to torch_npu.npu.ExternalStream or c10_npu::getStreamFromExternal as it is.
 *
 * Thread safety: every function may be called from any number of host
 * threads at once, unless it says otherwise.
 */
#ifndef ACL_ACL_BASE_H_
#define ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#if defined(ACL_BUILDING_LIBRARY)
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ACL_FUNC_VISIBILITY
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status of every ACL call; 0 is success. */
typedef int aclError;

/* Opaque handles. aclrtStream / aclrtEvent hold npuStream_t / npuEvent_t
 * values (validated 64-bit ids: a NULL, garbage or destroyed handle is an
 * error code, never a crash). */
typedef void* aclrtStream;
typedef void* aclrtEvent;
typedef void* aclrtContext;

/* --- Status codes of the ACL layer (acl_base.h) -------------------------- */
static const aclError ACL_SUCCESS = 0;
static const aclError ACL_ERROR_NONE = 0;
static const aclError ACL_ERROR_INVALID_PARAM = 100000;
static const aclError ACL_ERROR_UNINITIALIZE = 100001;
static const aclError ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const aclError ACL_ERROR_INVALID_FILE = 100003;
static const aclError ACL_ERROR_REPEAT_SUBSCRIBE = 100033;
static const aclError ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034;
static const aclError ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035;
static const aclError ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036;
static const aclError ACL_ERROR_REPEAT_FINALIZE = 100037;
static const aclError ACL_ERROR_BAD_ALLOC = 200000;
static const aclError ACL_ERROR_API_NOT_SUPPORT = 200001;
static const aclError ACL_ERROR_INVALID_DEVICE = 200002;
static const aclError ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const aclError ACL_ERROR_FEATURE_UNSUPPORTED = 200006;
static const aclError ACL_ERROR_INTERNAL_ERROR = 500000;
static const aclError ACL_ERROR_FAILURE = 500001;

/* --- Status codes of the runtime (rt_error_codes.h) ---------------------- */
static const aclError ACL_RT_SUCCESS = 0;
static const aclError ACL_ERROR_RT_PARAM_INVALID = 107000;
static const aclError ACL_ERROR_RT_INVALID_DEVICEID = 107001;
static const aclError ACL_ERROR_RT_CONTEXT_NULL = 107002;
static const aclError ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006;
static const aclError ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011;
static const aclError ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012;
static const aclError ACL_ERROR_RT_STREAM_NO_CB_REG = 107015;
static const aclError ACL_ERROR_RT_INVALID_HANDLE = 107017;
static const aclError ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107024;
static const aclError ACL_ERROR_RT_STREAM_UNJOINED = 107025;
static const aclError ACL_ERROR_RT_STREAM_CAPTURED = 107027;
static const aclError ACL_ERROR_RT_EVENT_CAPTURED = 107028;
static const aclError ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029;
static const aclError ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030;
static const aclError ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107031;
static const aclError ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036;
static const aclError ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038;
static const aclError ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
static const aclError ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
static const aclError ACL_ERROR_RT_NO_DEVICE = 207004;
static const aclError ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP = 207019;
static const aclError ACL_ERROR_RT_INTERNAL_ERROR = 507000;
static const aclError ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004;
static const aclError ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006;
static const aclError ACL_ERROR_RT_REPORT_TIMEOUT = 507012;
static const aclError ACL_ERROR_RT_AICORE_EXCEPTION = 507015;
static const aclError ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046;
static const aclError ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047;

/* Detailed message of the most recent failing ACL call on the calling thread
 * (the npurt message when npurt refused the call), or "" if none failed yet.
 * Valid until the next ACL call on this thread. Thread-local. */
ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_BASE_H_ */
