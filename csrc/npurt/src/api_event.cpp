// Entry points: events. See Note [Event versioning] in csrc/npurt/README.md.
#include <string>

#include "api_common.h"
#include "graph/capture.h"

using namespace npurt::internal;

namespace {

constexpr unsigned kKnownEventFlags = npuEventBlockingSync | npuEventDisableTiming;

// Note [Stream capture]: an event last recorded in a capture has no version
// to query, synchronize or time.
npuError_t refuseCaptured(const char* fn, const Event& event) {
  const std::shared_ptr<const CapturedRecord> record = event.captured();
  if (record == nullptr) return npuSuccess;
  return fail(npuErrorCapturedEvent, fn,
              "event " + std::to_string(event.id()) + " was last recorded in capture " +
                  std::to_string(record->captureId) + "; record it outside a capture first");
}

// Shared checks of ElapsedTime and GetTimestamp: timing enabled, recorded,
// complete. On success `version` is the completed latest version.
npuError_t completedTimedVersion(const char* fn, const Event& event,
                                 std::shared_ptr<EventVersion>& version) {
  if (const npuError_t s = refuseCaptured(fn, event); s != npuSuccess) return s;
  if (event.timingDisabled()) {
    return fail(npuErrorTimingDisabled, fn,
                "event " + std::to_string(event.id()) + " was created with npuEventDisableTiming");
  }
  version = event.latest();
  if (version == nullptr) {
    return fail(npuErrorEventNotRecorded, fn,
                "event " + std::to_string(event.id()) + " was never recorded");
  }
  if (!version->done()) {
    return fail(npuErrorNotReady, fn,
                "event " + std::to_string(event.id()) + " has not completed yet");
  }
  return npuSuccess;
}

npuError_t completeDeferred(Runtime& rt, npuDeferredRecord_t handle, const char* fn) {
  const std::shared_ptr<EventRecordTask> task =
      rt.deferredRecords.erase(rt.deferredRecords.toId(handleBits(handle)));
  if (task == nullptr) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "invalid or already completed deferred record %p",
                  static_cast<void*>(handle));
    return fail(npuErrorInvalidResourceHandle, fn, buf);
  }
  if (racecheck::enabled()) [[unlikely]]
    racecheck::onDeferredComplete(task->version());  // Note [Happens-before model]
  task->discard();  // stamps and completes the version: parked streams resume
  return npuSuccess;
}

}  // namespace

extern "C" {

npuError_t npuEventCreateWithFlags(npuEvent_t* event, unsigned int flags) {
  constexpr const char* kFn = "npuEventCreateWithFlags";
  return guarded(kFn, [&](Runtime& rt) {
    if (event == nullptr) return nullArgument(kFn, "event");
    if ((flags & ~kKnownEventFlags) != 0u) {
      return fail(npuErrorInvalidValue, kFn, "unknown event flags " + std::to_string(flags));
    }
    const uint64_t id = rt.events.newId();
    rt.events.insert(id, std::make_shared<Event>(id, flags));
    *event = eventHandle(rt, id);
    return npuSuccess;
  });
}

npuError_t npuEventCreate(npuEvent_t* event) {
  return npuEventCreateWithFlags(event, npuEventDefault);
}

npuError_t npuEventRecord(npuEvent_t eventHandle, npuStream_t streamHandle) {
  constexpr const char* kFn = "npuEventRecord";
  return guarded(kFn, [&](Runtime& rt) {
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    Stream* stream = findStreamCached(rt, streamHandle);
    if (stream == nullptr) return invalidStream(kFn, streamHandle);
    if (stream->capturing()) [[unlikely]] {
      // Recorded into the capture: an edge for the streams that wait on it.
      const CaptureOutcome outcome = captureRecord(*stream, *event, kFn);
      if (outcome.handled) return outcome.status;
    }
    // The new version is the latest from here on, before it is even queued:
    // a wait issued after this call returns binds to it.
    const std::shared_ptr<EventRecordTask> task = event->newVersion(*stream);
    uint64_t ticket = 0;
    try {
      ticket = submit(rt, *stream, InlineTask::heap(task.get()));  // keeps itself alive (event.h)
    } catch (...) {
      // Not enqueued (out of memory): the version is already the latest, so
      // complete it rather than leave waiters hanging, and drop the task.
      task->discard();
      task->dispose();
      throw;
    }
    // Note [Completion order]: from here on the stream's finished count can
    // complete the version too.
    task->version().setTicket(ticket);
    return npuSuccess;
  });
}

npuError_t npuEventQuery(npuEvent_t eventHandle) {
  constexpr const char* kFn = "npuEventQuery";
  return guarded(kFn, [&](Runtime& rt) {
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    if (event->maybeCaptured()) [[unlikely]] {
      if (const npuError_t s = refuseCaptured(kFn, *event); s != npuSuccess) return s;
    }
    const std::shared_ptr<EventVersion> version = event->latest();
    if (version != nullptr && !version->done()) {
      return fail(npuErrorNotReady, kFn, "the latest record has not completed");
    }
    if (version != nullptr && racecheck::enabled()) [[unlikely]]
      racecheck::hostSawVersion(*version);  // Note [Happens-before model]
    return npuSuccess;
  });
}

npuError_t npuEventSynchronize(npuEvent_t eventHandle) {
  constexpr const char* kFn = "npuEventSynchronize";
  return guarded(kFn, [&](Runtime& rt) {
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    if (event->maybeCaptured()) [[unlikely]] {
      if (const npuError_t s = refuseCaptured(kFn, *event); s != npuSuccess) return s;
    }
    if (const std::shared_ptr<EventVersion> version = event->latest()) {
      version->waitHost();
      if (racecheck::enabled()) [[unlikely]]
        racecheck::hostSawVersion(*version);  // Note [Happens-before model]
    }
    return npuSuccess;
  });
}

npuError_t npuEventElapsedTime(float* ms, npuEvent_t startHandle, npuEvent_t endHandle) {
  constexpr const char* kFn = "npuEventElapsedTime";
  return guarded(kFn, [&](Runtime& rt) {
    if (ms == nullptr) return nullArgument(kFn, "ms");
    const std::shared_ptr<Event> start = findEvent(rt, startHandle);
    if (start == nullptr) return invalidEvent(kFn, startHandle);
    const std::shared_ptr<Event> end = findEvent(rt, endHandle);
    if (end == nullptr) return invalidEvent(kFn, endHandle);
    // Timing first for both, then recorded, then complete (CUDA's order).
    for (const Event* e : {start.get(), end.get()}) {
      if (e->timingDisabled()) {
        return fail(npuErrorTimingDisabled, kFn,
                    "event " + std::to_string(e->id()) + " was created with npuEventDisableTiming");
      }
    }
    std::shared_ptr<EventVersion> startVersion;
    std::shared_ptr<EventVersion> endVersion;
    if (const npuError_t s = completedTimedVersion(kFn, *start, startVersion); s != npuSuccess) {
      return s;
    }
    if (const npuError_t s = completedTimedVersion(kFn, *end, endVersion); s != npuSuccess) {
      return s;
    }
    const auto deltaNs = static_cast<double>(endVersion->timestampNs()) -
                         static_cast<double>(startVersion->timestampNs());
    *ms = static_cast<float>(deltaNs / 1e6);
    return npuSuccess;
  });
}

npuError_t npuEventGetTimestamp(npuEvent_t eventHandle, uint64_t* ns) {
  constexpr const char* kFn = "npuEventGetTimestamp";
  return guarded(kFn, [&](Runtime& rt) {
    if (ns == nullptr) return nullArgument(kFn, "ns");
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    std::shared_ptr<EventVersion> version;
    if (const npuError_t s = completedTimedVersion(kFn, *event, version); s != npuSuccess) {
      return s;
    }
    *ns = version->timestampNs();
    return npuSuccess;
  });
}

npuError_t npuEventGetDevice(npuEvent_t eventHandle, int* device) {
  constexpr const char* kFn = "npuEventGetDevice";
  return guarded(kFn, [&](Runtime& rt) {
    if (device == nullptr) return nullArgument(kFn, "device");
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    *device = event->device();
    return npuSuccess;
  });
}

npuError_t npuEventDestroy(npuEvent_t eventHandle) {
  constexpr const char* kFn = "npuEventDestroy";
  return guardedRelease(kFn, [&](Runtime& rt) {
    // Pending versions live on in their record tasks and wait tasks.
    if (rt.events.erase(rt.events.toId(handleBits(eventHandle))) == nullptr) {
      return invalidEvent(kFn, eventHandle);
    }
    return npuSuccess;
  });
}

npuError_t npuEventRecordDeferred(npuEvent_t eventHandle, npuDeferredRecord_t* record) {
  constexpr const char* kFn = "npuEventRecordDeferred";
  return guarded(kFn, [&](Runtime& rt) {
    if (record == nullptr) return nullArgument(kFn, "record");
    const std::shared_ptr<Event> event = findEvent(rt, eventHandle);
    if (event == nullptr) return invalidEvent(kFn, eventHandle);
    const uint64_t id = rt.deferredRecords.newId();
    const std::shared_ptr<EventRecordTask> task =
        event->newDeferredVersion(Runtime::currentDevice());
    try {
      rt.deferredRecords.insert(id, task);
    } catch (...) {
      task->discard();  // already the latest version: complete it, nobody owns it
      throw;
    }
    *record = reinterpret_cast<npuDeferredRecord_t>(
        static_cast<uintptr_t>(rt.deferredRecords.toHandle(id)));
    return npuSuccess;
  });
}

npuError_t npuEventCompleteDeferred(npuDeferredRecord_t handle) {
  constexpr const char* kFn = "npuEventCompleteDeferred";
  try {
    // Also during exit (where guarded() refuses every call): a task
    // discarded by the shutdown may complete a version in its release, and
    // a host thread may still wait for it.
    Runtime& rt = Runtime::instance();
    if (rt.shutDown()) return completeDeferred(rt, handle, kFn);
  } catch (...) {
    // The runtime could not be built: guarded() reports it.
  }
  return guarded(kFn, [&](Runtime& rt) { return completeDeferred(rt, handle, kFn); });
}

}  // extern "C"
