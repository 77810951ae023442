// Shared plumbing of the extern "C" entry points (api_*.cpp).
//
// Every entry point is `return guarded("npuName", [&](Runtime& rt) {...});`.
// guarded() admits the call (sticky init error, shutdown), runs the body and
// turns any exception into a status: std::bad_alloc is
// npuErrorMemoryAllocation, anything else npuErrorUnknown (a bug in npurt).
// The message is stored on the way out, so nothing ever throws across C.
//
// Thread safety: everything here is thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "clock.h"
#include "errors.h"
#include "fault.h"
#include "npurt/npurt.h"
#include "racecheck/racecheck.h"
#include "runtime.h"

namespace npurt::internal {

template <typename Body>
npuError_t guarded(const char* function, Body&& body) noexcept {
  try {
    Runtime& rt = Runtime::instance();
    if (const npuError_t status = rt.admit(function); status != npuSuccess) [[unlikely]] {
      return status;
    }
    return body(rt);
  } catch (const std::bad_alloc&) {
    return fail(npuErrorMemoryAllocation, function, "host memory allocation failed");
  } catch (const std::exception& e) {
    return fail(npuErrorUnknown, function, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(npuErrorUnknown, function, "internal error: unknown exception");
  }
}

// Entry points that free or destroy (npuFree, npuFreeHost, npuHostUnregister,
// npuEventDestroy, npuStreamDestroy): once the exit hook has begun they do
// nothing and return npuSuccess, because layers above free from static
// destructors that run after it (Note [Shutdown order]).
template <typename Body>
npuError_t guardedRelease(const char* function, Body&& body) noexcept {
  try {
    if (Runtime::instance().shutDown()) [[unlikely]]
      return npuSuccess;
  } catch (...) {
    // The runtime could not be built: guarded() reports it.
  }
  return guarded(function, std::forward<Body>(body));
}

inline uint64_t handleBits(const void* handle) noexcept {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

inline npuStream_t streamHandle(const Runtime& rt, uint64_t id) noexcept {
  return reinterpret_cast<npuStream_t>(static_cast<uintptr_t>(rt.streams.toHandle(id)));
}

inline npuEvent_t eventHandle(const Runtime& rt, uint64_t id) noexcept {
  return reinterpret_cast<npuEvent_t>(static_cast<uintptr_t>(rt.events.toHandle(id)));
}

// Hot path: see findCached() in handle_registry.h for the pointer's validity.
inline Stream* findStreamCached(Runtime& rt, npuStream_t handle) {
  return rt.streams.findCached(rt.streams.toId(handleBits(handle)));
}

inline std::shared_ptr<Stream> findStream(Runtime& rt, npuStream_t handle) {
  return rt.streams.find(rt.streams.toId(handleBits(handle)));
}

inline std::shared_ptr<Event> findEvent(Runtime& rt, npuEvent_t handle) {
  return rt.events.find(rt.events.toId(handleBits(handle)));
}

inline npuError_t invalidStream(const char* function, npuStream_t handle) noexcept {
  char buf[64];
  std::snprintf(buf, sizeof buf, "invalid stream handle %p", static_cast<void*>(handle));
  return fail(npuErrorInvalidResourceHandle, function, buf);
}

inline npuError_t invalidEvent(const char* function, npuEvent_t handle) noexcept {
  char buf[64];
  std::snprintf(buf, sizeof buf, "invalid event handle %p", static_cast<void*>(handle));
  return fail(npuErrorInvalidResourceHandle, function, buf);
}

// Note [Fault injection]: the launch or synchronous-copy call that fires
// fails with npuErrorLaunchFailure (nothing enqueued or copied).
inline npuError_t injectedFault(const char* function) noexcept {
  return fail(npuErrorLaunchFailure, function, kInjectedFault);
}

inline npuError_t nullArgument(const char* function, const char* name) {
  return fail(npuErrorInvalidValue, function, std::string(name) + " is NULL");
}

// Hot path. Enqueues an inline task (Note [Inline tasks] in task.h),
// stamping the enqueue time and the thread's external correlation id (Note
// [Activity correlation] in npurt_activity.h) if the trace or the activity
// log is on, through the race detector if it is on (Note [Happens-before
// model]). Throws std::bad_alloc only if the stream's ring is full and no
// overflow node can be had (nothing is enqueued then); returns the task's
// ticket.
inline uint64_t submit(Runtime& rt, Stream& stream, InlineTask task) {
  if (rt.trace.enabled()) [[unlikely]] {
    task.enqueueNs = nowNs();
    task.externalId = ActivityLog::currentExternalId();
  }
  if (racecheck::enabled()) [[unlikely]]
    return racecheck::submit(stream, task);
  return stream.enqueue(task);
}

// Enqueues a node task built by the caller. The stream owns it once enqueued;
// if the enqueue throws, `task` still owns (and frees) it.
inline void submit(Runtime& rt, Stream& stream, TaskPtr task) {
  submit(rt, stream, InlineTask::heap(task.get()));
  (void)task.release();  // the stream owns it now (task.h)
}

}  // namespace npurt::internal
