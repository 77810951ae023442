// Status names and descriptions, and the thread-local last error message.
#include "errors.h"

#include <string>

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
     "device memory capacity exceeded or host allocation failed"},
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
    {npuErrorUnknown, "npuErrorUnknown", "internal error in npurt"},
};

const ErrorInfo* findError(const npuError_t& error) noexcept {
  const int raw = rawEnumValue(error);  // may be any int (C callers)
  for (const ErrorInfo& info : kErrors) {
    if (static_cast<int>(info.code) == raw) return &info;
  }
  return nullptr;
}

// The message storage. A function-local thread_local so that it is
// constructed on first use by each thread (also by threads that start before
// the runtime initialises).
struct LastError {
  std::string text;
  // Points into `text` or at a string literal (the fallback); "" initially.
  const char* view = "";
};

LastError& lastError() noexcept {
  static thread_local LastError state;
  return state;
}

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
  LastError& state = lastError();
  try {
    state.text.clear();
    state.text.reserve(function.size() + 2 + detail.size());
    state.text.append(function).append(": ").append(detail);
    state.view = state.text.c_str();
  } catch (...) {
    // Only std::bad_alloc is possible here; the message must not make
    // matters worse, so fall back to a literal.
    state.view = "npurt: out of host memory while formatting an error message";
  }
  return code;
}

const char* lastErrorMessage() noexcept { return lastError().view; }

}  // namespace npurt::internal
