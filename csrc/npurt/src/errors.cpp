// Status names and descriptions, and the thread-local last error message.
#include "errors.h"

#include <cstring>
#include <type_traits>

namespace npurt::internal {
namespace {

struct ErrorInfo {
  npuError_t code;
  const char* name;
  const char* description;
};

// One row per status of npuError_t, in declaration order.
constexpr ErrorInfo kErrors[] = {
    {npuSuccess, "npuSuccess", "no error"},
    {npuErrorInvalidValue, "npuErrorInvalidValue",
     "an argument is out of range or NULL where a pointer is required"},
    {npuErrorMemoryAllocation, "npuErrorMemoryAllocation",
     "out of memory (device memory capacity exceeded, or a host allocation failed)"},
    {npuErrorInitializationError, "npuErrorInitializationError",
     "the runtime configuration (environment variables) is invalid"},
    {npuErrorInvalidDevice, "npuErrorInvalidDevice", "invalid device ordinal"},
    {npuErrorInvalidResourceHandle, "npuErrorInvalidResourceHandle",
     "invalid (NULL, garbage or destroyed) stream or event handle"},
    {npuErrorInvalidDevicePointer, "npuErrorInvalidDevicePointer",
     "pointer is not inside a live device allocation or the range overruns it"},
    {npuErrorNotReady, "npuErrorNotReady", "work is still queued or running"},
    {npuErrorTimeout, "npuErrorTimeout", "the timed wait expired before the work completed"},
    {npuErrorLaunchFailure, "npuErrorLaunchFailure", "a task failed while running on the device"},
    {npuErrorInvalidMemcpyDirection, "npuErrorInvalidMemcpyDirection",
     "the memcpy kind does not match the pointers given"},
    {npuErrorTimingDisabled, "npuErrorTimingDisabled",
     "the event was created with timing disabled"},
    {npuErrorEventNotRecorded, "npuErrorEventNotRecorded", "the event was never recorded"},
    {npuErrorHostMemoryAlreadyRegistered, "npuErrorHostMemoryAlreadyRegistered",
     "the host range is already registered"},
    {npuErrorHostMemoryNotRegistered, "npuErrorHostMemoryNotRegistered",
     "the pointer is not the start of a registered host range"},
    {npuErrorRuntimeShutdown, "npuErrorRuntimeShutdown", "the runtime is shutting down"},
    {npuErrorNotSupported, "npuErrorNotSupported",
     "the operation is not supported by the simulated device"},
    {npuErrorStreamCaptureUnsupported, "npuErrorStreamCaptureUnsupported",
     "the operation is not permitted while the stream is capturing; the capture is invalidated"},
    {npuErrorStreamCaptureInvalidated, "npuErrorStreamCaptureInvalidated",
     "the capture was invalidated by an earlier error"},
    {npuErrorStreamCaptureUnjoined, "npuErrorStreamCaptureUnjoined",
     "a stream forked into the capture did not join the origin stream again"},
    {npuErrorStreamCaptureWrongThread, "npuErrorStreamCaptureWrongThread",
     "the capture must be ended by the thread that began it"},
    {npuErrorStreamCaptureIsolation, "npuErrorStreamCaptureIsolation",
     "a capturing stream depended on work outside its capture"},
    {npuErrorCapturedEvent, "npuErrorCapturedEvent", "the event was last recorded in a capture"},
    {npuErrorIllegalState, "npuErrorIllegalState",
     "the stream is not in the state the operation requires"},
    {npuErrorStreamCaptureUnmatched, "npuErrorStreamCaptureUnmatched",
     "the capture was not ended on the stream that began it"},
    {npuErrorGraphExecUpdateFailure, "npuErrorGraphExecUpdateFailure",
     "the update does not match the instantiated graph"},
    {npuErrorUnknown, "npuErrorUnknown", "internal error in npurt"},
};

const ErrorInfo* findError(const npuError_t& error) noexcept {
  const int raw = rawEnumValue(error);  // may be any int (C callers)
  for (const ErrorInfo& info : kErrors) {
    if (static_cast<int>(info.code) == raw) return &info;
  }
  return nullptr;
}

// The message storage. Note [Last error storage]: a fixed buffer in a
// trivially destructible, constant-initialised thread_local, never a
// std::string. Such a variable has no destructor, so it stays usable for the
// whole life of its thread: npurt calls made from later thread-local
// destructors, from atexit hooks that run after the runtime's shutdown, or
// from other libraries' static destructors (all of which happen after the
// main thread's thread-local destructors) write into live storage instead of
// a destroyed string (a double free before this rule). Storing a message
// also never allocates, so it cannot fail; longer messages are truncated.
struct LastError {
  char text[kLastErrorCapacity];
};
static_assert(std::is_trivially_destructible_v<LastError>);

thread_local constinit LastError tLastError{};  // text[0] == '\0': no error yet

}  // namespace

const char* errorName(const npuError_t& error) noexcept {
  const ErrorInfo* info = findError(error);
  return info != nullptr ? info->name : "npuErrorUnrecognized";
}

const char* errorString(const npuError_t& error) noexcept {
  const ErrorInfo* info = findError(error);
  return info != nullptr ? info->description : "unrecognized error code";
}

npuError_t fail(npuError_t code, std::string_view function, std::string_view detail) noexcept {
  char* out = tLastError.text;
  size_t room = sizeof tLastError.text - 1;  // keep one byte for the NUL
  for (const std::string_view part : {function, std::string_view(": "), detail}) {
    const size_t n = part.size() < room ? part.size() : room;
    std::memcpy(out, part.data(), n);
    out += n;
    room -= n;
  }
  *out = '\0';
  return code;
}

const char* lastErrorMessage() noexcept { return tLastError.text; }

}  // namespace npurt::internal
