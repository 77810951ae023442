// Stream capture: recording work into a graph instead of running it.
// See Note [Stream capture] in csrc/npurt/README.md for the rules.
//
// One CaptureSession per npuStreamBeginCapture. It holds the nodes recorded
// so far and, for every stream taking part (the origin and the streams
// forked into it), the stream's *frontier*: the nodes the next operation
// captured on that stream depends on. Capturing an operation adds a node
// depending on the frontier and makes the frontier that node. An event
// recorded on a capturing stream stores the frontier (CapturedRecord); a
// stream that waits on it adds that frontier to its own, joining the
// capture first if it was not capturing (a fork). A record and a wait
// inside one capture are therefore edges, not nodes.
//
// The registry maps each capturing stream to its session, under one mutex.
// Launch entry points check Stream::capturing() (a relaxed load) and take
// the mutex only when it is set; the mutex then decides, so a launch racing
// with npuStreamEndCapture is either captured or enqueued, never lost.
//
// Thread safety: every function is thread-safe. Tasks released by a capture
// (an invalidated or failed one) are released after the mutex is dropped,
// so a release may call npurt.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "../event.h"
#include "../stream.h"
#include "graph.h"
#include "npurt/npurt.h"

namespace npurt::internal {

class CaptureSession;

// What an event recorded on a capturing stream holds instead of a version.
struct CapturedRecord {
  std::weak_ptr<CaptureSession> session;
  uint64_t captureId;
  std::vector<uint32_t> frontier;
};

// Outcome of offering an operation to the capture machinery: not captured
// (the caller goes on with the eager path), or handled with a status.
struct CaptureOutcome {
  bool handled = false;
  npuError_t status = npuSuccess;
};

// Records a node made by make() (called under the registry mutex, after the
// node's slot is reserved, so a failure to record never runs a release) if
// `stream` captures. `fn` names the entry point in error messages.
CaptureOutcome captureWork(Stream& stream, const char* fn,
                           const std::function<NodeWorkPtr()>& make);
// npuLaunchTask on a capturing stream (npuTaskNotReplayable is refused).
CaptureOutcome captureTask(Stream& stream, const char* fn, const npuTask& task);
// npuEventRecord on a capturing stream.
CaptureOutcome captureRecord(Stream& stream, Event& event, const char* fn);
// npuStreamWaitEvent: a capturing stream, or an event last recorded in a
// capture (fork).
CaptureOutcome captureWait(Stream& stream, Event& event, const char* fn);

// npuStreamSynchronize / npuStreamQuery / npuGraphLaunch on a capturing
// stream: invalidates the capture and returns
// npuErrorStreamCaptureUnsupported; npuSuccess if the stream does not
// capture.
npuError_t refuseIfCapturing(Stream& stream, const char* fn);
// A potentially unsafe call (npuMemcpy, npuMemset, npuDeviceSynchronize):
// refused, invalidating the captures that forbid it, if the calling thread
// has a global or thread-local capture going or any thread a global one.
// One relaxed load when nothing captures.
npuError_t checkUnsafeCall(const char* fn);
// npuStreamDestroy of a capturing stream: invalidates its capture and takes
// the stream out of it.
void streamDestroyed(Stream& stream);

// The entry points of the capture API (api_graph.cpp).
npuError_t beginCapture(Stream& stream, npuStreamCaptureMode mode, const char* fn);
npuError_t endCapture(Stream& stream, std::shared_ptr<Graph>& graph, const char* fn);
void captureStatus(Stream& stream, npuStreamCaptureStatus& status, uint64_t& id);
npuError_t beginTaskGroup(Stream& stream, const char* fn);
npuError_t endTaskGroup(Stream& stream, npuTaskGroup_t& group, const char* fn);
npuError_t beginFusedScope(Stream& stream, const char* name, const char* fn);
npuError_t endFusedScope(Stream& stream, const char* fn);

}  // namespace npurt::internal
