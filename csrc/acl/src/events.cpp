// ACL events over npurt events: an aclrtEvent is the npuEvent_t value.
#include <string>

#include "acl/acl_rt.h"
#include "acl_common.h"

using acl::check;
using acl::fail;
using acl::guarded;
using acl::resolveStream;

namespace {

constexpr uint32_t kKnownEventFlags =
    ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE;

npuEvent_t asEvent(aclrtEvent event) { return static_cast<npuEvent_t>(event); }

}  // namespace

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event) {
  return aclrtCreateEventWithFlag(event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  return guarded("aclrtCreateEventWithFlag", [&]() -> aclError {
    if (event == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
    if (flag == 0 || (flag & ~kKnownEventFlags) != 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtCreateEventWithFlag: flag " + std::to_string(flag) +
                      " is invalid (a combination of ACL_EVENT_SYNC, "
                      "ACL_EVENT_CAPTURE_STREAM_PROGRESS, ACL_EVENT_TIME_LINE)");
    }
    const unsigned npuFlags = (flag & ACL_EVENT_TIME_LINE) ? npuEventDefault : npuEventDisableTiming;
    npuEvent_t e = nullptr;
    if (aclError s = check(npuEventCreateWithFlags(&e, npuFlags), "aclrtCreateEvent")) return s;
    *event = e;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return guarded("aclrtRecordEvent", [&]() -> aclError {
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtRecordEvent")) return e;
    return check(npuEventRecord(asEvent(event), s), "aclrtRecordEvent");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus* status) {
  return guarded("aclrtQueryEventStatus", [&]() -> aclError {
    if (status == nullptr) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
    }
    // ACL reports a never-recorded event as not ready (npurt: complete).
    int device = -1;
    if (aclError e = check(npuEventGetDevice(asEvent(event), &device), "aclrtQueryEventStatus")) {
      return e;
    }
    if (device < 0) {
      *status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
      return ACL_SUCCESS;
    }
    const npuError_t query = npuEventQuery(asEvent(event));
    if (query == npuErrorNotReady) {
      *status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
      return ACL_SUCCESS;
    }
    if (aclError e = check(query, "aclrtQueryEventStatus")) return e;
    *status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return guarded("aclrtSynchronizeEvent", [&] {
    return check(npuEventSynchronize(asEvent(event)), "aclrtSynchronizeEvent");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent start, aclrtEvent end) {
  return guarded("aclrtEventElapsedTime", [&]() -> aclError {
    if (ms == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
    const npuError_t status = npuEventElapsedTime(ms, asEvent(start), asEvent(end));
    if (status == npuErrorNotReady) {
      return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                  "aclrtEventElapsedTime: an event's latest record has not completed yet");
    }
    return check(status, "aclrtEventElapsedTime");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event) {
  return guarded("aclrtDestroyEvent",
                 [&] { return check(npuEventDestroy(asEvent(event)), "aclrtDestroyEvent"); });
}

}  // extern "C"
