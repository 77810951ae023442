// Entry points: streams and the work that is enqueued on them.
// See Note [Stream scheduling rule] and Note [Task failure rule] in
// csrc/npurt/README.md.
#include <algorithm>
#include <climits>
#include <string>

#include "api_common.h"
#include "graph/capture.h"
#include "node_pool.h"
#include "npurt/npurt_stream_idle.h"

using namespace npurt::internal;

namespace {

// Upper bound of every task delay, as for NPU_SIM_TASK_DELAY_US.
constexpr int64_t kMaxDelayUs = 10'000'000;

npuError_t createStream(const char* fn, npuStream_t* stream, unsigned flags, int priority) {
  return guarded(fn, [&](Runtime& rt) {
    if (stream == nullptr) return nullArgument(fn, "stream");
    if ((flags & ~npuStreamNonBlocking) != 0u) {
      return fail(npuErrorInvalidValue, fn, "unknown stream flags " + std::to_string(flags));
    }
    priority = std::clamp(priority, kGreatestPriority, kLeastPriority);  // as CUDA does
    const int deviceIndex = Runtime::currentDevice();
    Device& device = rt.device(deviceIndex);
    device.executor().start();  // Note [Executor thread start]
    const uint64_t id = rt.streams.newId();
    auto created = std::make_shared<Stream>(id, deviceIndex, flags, priority, device.executor());
    device.addStream(created);
    try {
      rt.streams.insert(id, created);
    } catch (...) {
      created->markDestroyed();  // never visible: let the device drop it
      throw;
    }
    *stream = streamHandle(rt, id);
    return npuSuccess;
  });
}

// Hot path: looks up the stream and enqueues the inline task made by make(),
// or, on a capturing stream, records the node work made by capture().
template <typename Make, typename Capture>
npuError_t launch(const char* fn, npuStream_t handle, Make&& make, Capture&& capture) {
  return guarded(fn, [&](Runtime& rt) {
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(fn, handle);
    if (stream->capturing()) [[unlikely]] {
      const CaptureOutcome outcome = captureWork(*stream, fn, capture);
      if (outcome.handled) return outcome.status;
    }
    if (faults().fires(FaultKind::kLaunch)) [[unlikely]]
      return injectedFault(fn);
    submit(rt, *stream, make());
    return npuSuccess;
  });
}

}  // namespace

extern "C" {

npuError_t npuStreamCreate(npuStream_t* stream) {
  return createStream("npuStreamCreate", stream, npuStreamDefault, 0);
}

npuError_t npuStreamCreateWithFlags(npuStream_t* stream, unsigned int flags) {
  return createStream("npuStreamCreateWithFlags", stream, flags, 0);
}

npuError_t npuStreamCreateWithPriority(npuStream_t* stream, unsigned int flags, int priority) {
  return createStream("npuStreamCreateWithPriority", stream, flags, priority);
}

npuError_t npuStreamDestroy(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamDestroy";
  return guardedRelease(kFn, [&](Runtime& rt) {
    std::shared_ptr<Stream> stream = findStream(rt, handle);
    if (stream == nullptr || !stream->beginDestroy()) return invalidStream(kFn, handle);
    streamDestroyed(*stream);  // invalidates its capture, if it captures
    // Callbacks first, while the handle still works (they may enqueue).
    rt.runDestroyCallbacks(handle, stream->device());
    rt.streams.erase(stream->id());  // bumps the epoch: every thread's cache misses
    stream->markDestroyed();
    // Queued work keeps running (Note [Handle validation]); an idle stream
    // is dropped from the device at once.
    rt.device(stream->device()).prune();
    return npuSuccess;
  });
}

npuError_t npuStreamQuery(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamQuery";
  return guarded(kFn, [&](Runtime& rt) {
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    if (const npuError_t s = refuseIfCapturing(*stream, kFn); s != npuSuccess) return s;
    // Idle first: the executor records a failure before it pops the
    // task, so a stream seen idle here has its failures visible below.
    const bool idle = stream->idle();
    std::string message;
    if (stream->takeFailure(message)) return fail(npuErrorLaunchFailure, kFn, message);
    if (!idle) return fail(npuErrorNotReady, kFn, "work is queued or running");
    if (racecheck::enabled()) [[unlikely]]
      racecheck::hostSawStream(*stream);  // Note [Happens-before model]
    return npuSuccess;
  });
}

npuError_t npuStreamIsIdle(npuStream_t handle, int* idle) {
  constexpr const char* kFn = "npuStreamIsIdle";
  return guarded(kFn, [&](Runtime& rt) {
    if (idle == nullptr) return nullArgument(kFn, "idle");
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    // Idle first, as in npuStreamQuery: a failure is recorded before its
    // task is popped, so a stream seen idle has its failures visible below.
    const bool empty = stream->idle();
    std::string message;
    *idle = (empty && !stream->capturing() && !stream->peekFailure(message)) ? 1 : 0;
    if (*idle != 0 && racecheck::enabled()) [[unlikely]]
      racecheck::hostSawStream(*stream);  // Note [Happens-before model]
    return npuSuccess;
  });
}

npuError_t npuStreamPeekAtLastError(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamPeekAtLastError";
  return guarded(kFn, [&](Runtime& rt) {
    // find(), not the thread's cache: called from tasks on executor
    // threads, where replacing a cache entry could drop the last reference
    // to another stream in the middle of a task.
    const std::shared_ptr<Stream> stream = findStream(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    // Leaves the failure held (Note [Task failure rule]): takes no lock that
    // an executor holds while it runs or releases a task.
    std::string message;
    if (stream->peekFailure(message)) return fail(npuErrorLaunchFailure, kFn, message);
    return npuSuccess;
  });
}

npuError_t npuStreamSynchronizeWithTimeout(npuStream_t handle, int64_t timeoutUs) {
  constexpr const char* kFn = "npuStreamSynchronizeWithTimeout";
  return guarded(kFn, [&](Runtime& rt) {
    if (timeoutUs < 0) {
      return fail(npuErrorInvalidValue, kFn, "timeoutUs " + std::to_string(timeoutUs) + " < 0");
    }
    std::shared_ptr<Stream> stream = findStream(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    if (const npuError_t s = refuseIfCapturing(*stream, kFn); s != npuSuccess) return s;
    // Timeouts beyond ~292 years are forever.
    const int64_t timeoutNs = timeoutUs > INT64_MAX / 1000 ? -1 : timeoutUs * 1000;
    // The work enqueued before this call, not idleness (Note [Stream
    // scheduling rule]): a producer that keeps enqueuing cannot starve us.
    if (!stream->waitFinished(stream->enqueued(), timeoutNs)) {
      return fail(npuErrorTimeout, kFn,
                  "stream " + std::to_string(stream->id()) +
                      " has not finished the work enqueued before the call after " +
                      std::to_string(timeoutUs) + " us");
    }
    if (racecheck::enabled()) [[unlikely]]
      racecheck::hostSawStream(*stream);  // Note [Happens-before model]
    std::string message;
    if (stream->takeFailure(message)) return fail(npuErrorLaunchFailure, kFn, message);
    return npuSuccess;
  });
}

npuError_t npuStreamSynchronize(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamSynchronize";
  return guarded(kFn, [&](Runtime& rt) {
    std::shared_ptr<Stream> stream = findStream(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    // Its captured work is not enqueued: refused, never a hang (Note
    // [Stream capture]).
    if (const npuError_t s = refuseIfCapturing(*stream, kFn); s != npuSuccess) return s;
    stream->waitFinished(stream->enqueued(), -1);  // as above
    if (racecheck::enabled()) [[unlikely]]
      racecheck::hostSawStream(*stream);  // Note [Happens-before model]
    // Only after the work enqueued before the call has finished (Note [Task
    // failure rule]).
    std::string message;
    if (stream->takeFailure(message)) return fail(npuErrorLaunchFailure, kFn, message);
    return npuSuccess;
  });
}

npuError_t npuStreamWaitEvent(npuStream_t handle, npuEvent_t eventHandle, unsigned int flags) {
  constexpr const char* kFn = "npuStreamWaitEvent";
  return guarded(kFn, [&](Runtime& rt) {
    if (flags != 0u) {
      return fail(npuErrorInvalidValue, kFn, "flags must be 0, got " + std::to_string(flags));
    }
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    if (stream->capturing() || event->maybeCaptured()) [[unlikely]] {
      // A capturing stream, or an event recorded in a capture (a fork).
      const CaptureOutcome outcome = captureWait(*stream, *event, kFn);
      if (outcome.handled) return outcome.status;
    }
    // Bind to the latest version now (Note [Event versioning]). Never
    // recorded or already complete: nothing to wait for.
    std::shared_ptr<EventVersion> version = event->latest();
    if (version == nullptr) return npuSuccess;
    if (version->done()) {
      // The host saw it complete: what follows is ordered after it (Note
      // [Happens-before model]).
      if (racecheck::enabled()) [[unlikely]]
        racecheck::hostSawVersion(*version);
      return npuSuccess;
    }
    submit(rt, *stream, makeTask<EventWaitTask>(std::move(version)));
    return npuSuccess;
  });
}

npuError_t npuStreamGetDevice(npuStream_t handle, int* device) {
  constexpr const char* kFn = "npuStreamGetDevice";
  return guarded(kFn, [&](Runtime& rt) {
    if (device == nullptr) return nullArgument(kFn, "device");
    const Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    *device = stream->device();
    return npuSuccess;
  });
}

npuError_t npuStreamGetPriority(npuStream_t handle, int* priority) {
  constexpr const char* kFn = "npuStreamGetPriority";
  return guarded(kFn, [&](Runtime& rt) {
    if (priority == nullptr) return nullArgument(kFn, "priority");
    const Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    *priority = stream->priority();
    return npuSuccess;
  });
}

npuError_t npuStreamGetFlags(npuStream_t handle, unsigned int* flags) {
  constexpr const char* kFn = "npuStreamGetFlags";
  return guarded(kFn, [&](Runtime& rt) {
    if (flags == nullptr) return nullArgument(kFn, "flags");
    const Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    *flags = stream->flags();
    return npuSuccess;
  });
}

npuError_t npuStreamGetId(npuStream_t handle, uint64_t* id) {
  constexpr const char* kFn = "npuStreamGetId";
  return guarded(kFn, [&](Runtime& rt) {
    if (id == nullptr) return nullArgument(kFn, "id");
    const Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    *id = stream->id();
    return npuSuccess;
  });
}

npuError_t npuLaunchHostFunc(npuStream_t handle, npuHostFn_t fn, void* userData) {
  constexpr const char* kFn = "npuLaunchHostFunc";
  if (fn == nullptr) {
    return guarded(kFn, [&](Runtime&) { return nullArgument(kFn, "fn"); });
  }
  return launch(
      kFn, handle, [&] { return InlineTask::hostFunc(fn, userData); },
      [&] { return makeHostFnWork(fn, userData); });
}

npuError_t npuLaunchTask(npuStream_t handle, const npuTask* task) {
  constexpr const char* kFn = "npuLaunchTask";
  return guarded(kFn, [&](Runtime& rt) {
    if (task == nullptr) return nullArgument(kFn, "task");
    if (task->run == nullptr) return nullArgument(kFn, "task->run");
    if ((task->flags & ~(npuTaskCopyName | npuTaskNotReplayable)) != 0u) {
      return fail(npuErrorInvalidValue, kFn, "unknown task flags " + std::to_string(task->flags));
    }
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    if (stream->capturing()) [[unlikely]] {
      // Note [Replayable tasks] in graph/node_work.h.
      const CaptureOutcome outcome = captureTask(*stream, kFn, *task);
      if (outcome.handled) return outcome.status;
    }
    if (faults().fires(FaultKind::kLaunch)) [[unlikely]]
      return injectedFault(kFn);
    // On any error above or an exception here, release() is not called:
    // the caller keeps userData (npuLaunchTask contract). Only a copied name
    // needs a node (Note [Inline tasks] in task.h).
    if ((task->flags & npuTaskCopyName) != 0u && task->name != nullptr) {
      submit(rt, *stream, makeTask<UserTask>(*task));
    } else {
      submit(rt, *stream, InlineTask::userTask(*task));
    }
    return npuSuccess;
  });
}

// Not guarded(): memory for userData needs no device, and a release() may
// free it while or after the runtime shuts down.
npuError_t npuTaskDataAlloc(void** ptr, size_t size) {
  constexpr const char* kFn = "npuTaskDataAlloc";
  if (ptr == nullptr) return nullArgument(kFn, "ptr");
  if (size == 0) return fail(npuErrorInvalidValue, kFn, "size must be > 0, got 0");
  try {
    *ptr = NodePool::allocate(size);
  } catch (const std::bad_alloc&) {
    *ptr = nullptr;
    return fail(npuErrorMemoryAllocation, kFn,
                "host memory allocation of " + std::to_string(size) + " bytes failed");
  }
  return npuSuccess;
}

npuError_t npuTaskDataFree(void* ptr, size_t size) {
  if (ptr != nullptr) NodePool::release(ptr, size);
  return npuSuccess;
}

npuError_t npuStreamSetTaskDelay(npuStream_t handle, int64_t delayUs) {
  constexpr const char* kFn = "npuStreamSetTaskDelay";
  return guarded(kFn, [&](Runtime& rt) {
    if (delayUs > kMaxDelayUs) {
      return fail(npuErrorInvalidValue, kFn,
                  "delayUs must be at most " + std::to_string(kMaxDelayUs) + ", got " +
                      std::to_string(delayUs));
    }
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    stream->setDelayOverrideUs(delayUs < 0 ? -1 : delayUs);  // Note [Task delay]
    return npuSuccess;
  });
}

}  // extern "C"
