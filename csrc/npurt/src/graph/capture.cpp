// Stream capture: the registry of capturing streams and the capture paths
// of the entry points. See graph/capture.h and Note [Stream capture].
#include "capture.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "../errors.h"
#include "capture_registry.h"
#include "capture_session.h"

namespace npurt::internal {
namespace {

// relaxed: ids only need to be unique.
std::atomic<uint64_t> gNextGroupId{1};

void addUnique(std::vector<uint32_t>& into, const std::vector<uint32_t>& from) {
  for (const uint32_t n : from) {
    if (std::find(into.begin(), into.end(), n) == into.end()) into.push_back(n);
  }
}

CaptureOutcome addWork(Stream& stream, const char* fn, const npuTask* task,
                       const std::function<NodeWorkPtr()>& make) {
  std::vector<GraphNode> released;  // dropped after the lock (tasks' releases)
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return {};  // the capture ended meanwhile: run it eagerly
  if (s->invalid) return {true, invalidated(*s, fn)};
  if (task != nullptr && (task->flags & npuTaskNotReplayable) != 0u) {
    const std::string name = task->name != nullptr ? task->name : "task";
    return {true,
            refuse(*s, npuErrorStreamCaptureUnsupported, fn,
                   "task '" + name + "' is npuTaskNotReplayable and cannot be captured", released)};
  }
  addNode(*s, s->members.at(stream.id()), make);
  return {true, npuSuccess};
}

}  // namespace

CaptureOutcome captureWork(Stream& stream, const char* fn,
                           const std::function<NodeWorkPtr()>& make) {
  return addWork(stream, fn, nullptr, make);
}

CaptureOutcome captureTask(Stream& stream, const char* fn, const npuTask& task) {
  return addWork(stream, fn, &task, [&] { return makeTaskWork(task); });
}

CaptureOutcome captureRecord(Stream& stream, Event& event, const char* fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return {};
  if (s->invalid) return {true, invalidated(*s, fn)};
  auto record = std::make_shared<CapturedRecord>(
      CapturedRecord{s, s->id, s->members.at(stream.id()).frontier});
  event.setCaptured(std::move(record), stream.device());
  return {true, npuSuccess};
}

namespace {

// A wait on an event recorded in capture `theirs` (alive, not ended).
npuError_t waitOnCaptured(Registry& r, Stream& stream, const SessionPtr& mine,
                          const SessionPtr& theirs, const CapturedRecord& record, const char* fn,
                          std::vector<GraphNode>& released) {
  if (mine != nullptr && mine != theirs) {
    const std::string why = "stream " + std::to_string(stream.id()) + " of " + captureText(*mine) +
                            " waited on an event recorded in " + captureText(*theirs);
    theirs->invalidate(std::string(fn) + ": " + why, released);
    return refuse(*mine, npuErrorStreamCaptureIsolation, fn, why, released);
  }
  if (theirs->invalid) return invalidated(*theirs, fn);
  if (mine == nullptr) {
    // Fork: the stream joins the capture, depending on the record.
    if (stream.device() != theirs->device) {
      return refuse(*theirs, npuErrorNotSupported, fn,
                    streamText(stream) + " is on device " + std::to_string(stream.device()) +
                        ", and a capture cannot span devices",
                    released);
    }
    CaptureMember member;
    member.stream = stream.shared_from_this();
    member.frontier = record.frontier;
    theirs->members.emplace(stream.id(), std::move(member));
    r.byStream.emplace(stream.id(), theirs);
    stream.setCapturing(true);
    return npuSuccess;
  }
  CaptureMember& member = mine->members.at(stream.id());
  if (member.fusedOpen) {
    return refuse(*mine, npuErrorStreamCaptureUnsupported, fn,
                  streamText(stream) + " cannot wait on an event inside a fused scope", released);
  }
  addUnique(member.frontier, record.frontier);
  return npuSuccess;
}

}  // namespace

CaptureOutcome captureWait(Stream& stream, Event& event, const char* fn) {
  const std::shared_ptr<const CapturedRecord> record = event.captured();
  if (record == nullptr && !stream.capturing()) return {};
  std::vector<GraphNode> released;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr mine = r.find(stream);
  if (record != nullptr) {
    const SessionPtr theirs = record->session.lock();
    if (theirs == nullptr || theirs->ended) {
      const std::string why = "the event was last recorded in capture " +
                              std::to_string(record->captureId) +
                              ", which has ended; record it again outside a capture";
      if (mine != nullptr) return {true, refuse(*mine, npuErrorCapturedEvent, fn, why, released)};
      return {true, fail(npuErrorCapturedEvent, fn, why)};
    }
    return {true, waitOnCaptured(r, stream, mine, theirs, *record, fn, released)};
  }
  if (mine == nullptr) return {};  // the capture ended meanwhile
  if (mine->invalid) return {true, invalidated(*mine, fn)};
  const std::shared_ptr<EventVersion> version = event.latest();
  // Complete (or never recorded): nothing to wait for, now or at replay.
  if (version == nullptr || version->done()) return {true, npuSuccess};
  return {true, refuse(*mine, npuErrorStreamCaptureIsolation, fn,
                       streamText(stream) +
                           " waited on an event recorded outside the capture that has not "
                           "completed (record it inside the capture, or wait before beginning)",
                       released)};
}

npuError_t refuseIfCapturing(Stream& stream, const char* fn) {
  if (!stream.capturing()) return npuSuccess;
  std::vector<GraphNode> released;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return npuSuccess;
  return refuse(*s, npuErrorStreamCaptureUnsupported, fn,
                streamText(stream) + " is capturing (" + captureText(*s) +
                    "): its work has not been enqueued",
                released);
}

npuError_t checkUnsafeCall(const char* fn) {
  Registry& r = registry();
  // Nothing captures: the common case costs one relaxed load.
  if (r.liveCount.load(std::memory_order_relaxed) == 0) [[likely]]
    return npuSuccess;
  std::vector<GraphNode> released;
  std::lock_guard<std::mutex> lock(r.mutex);
  const std::thread::id self = std::this_thread::get_id();
  npuError_t status = npuSuccess;
  for (const SessionPtr& s : r.live) {
    if (!s->forbidsUnsafeCallsOn(self)) continue;
    const char* mode = s->mode == npuStreamCaptureModeGlobal ? "global" : "thread-local";
    status = refuse(*s, npuErrorStreamCaptureUnsupported, fn,
                    std::string("not permitted while ") + captureText(*s) + " (" + mode +
                        " mode) is active; use npuStreamCaptureModeRelaxed to allow it",
                    released);
  }
  return status;
}

void streamDestroyed(Stream& stream) {
  if (!stream.capturing()) return;
  std::vector<GraphNode> released;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return;
  s->invalidate(streamText(stream) + " was destroyed while capturing", released);
  if (stream.id() == s->origin) {
    r.finish(s);  // nobody can end it any more
    return;
  }
  s->members.erase(stream.id());
  r.byStream.erase(stream.id());
  stream.setCapturing(false);
}

npuError_t beginCapture(Stream& stream, npuStreamCaptureMode mode, const char* fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (const SessionPtr s = r.find(stream)) {
    return fail(npuErrorIllegalState, fn,
                streamText(stream) + " is already capturing (" + captureText(*s) + ")");
  }
  r.start(std::make_shared<CaptureSession>(newCaptureId(), mode, stream.shared_from_this()),
          stream);
  return npuSuccess;
}

npuError_t endSession(Registry& r, Stream& stream, bool conditionalBody, const char* fn,
                      SessionPtr& ended, std::vector<GraphNode>& nodes, TaskGroups& groups,
                      std::vector<GraphNode>& released) {
  const SessionPtr s = r.find(stream);
  const char* end = conditionalBody ? "npuStreamEndCaptureToIf" : "npuStreamEndCapture";
  if (s == nullptr) return fail(npuErrorIllegalState, fn, streamText(stream) + " is not capturing");
  if ((s->conditional != nullptr) != conditionalBody) {
    return fail(npuErrorIllegalState, fn,
                streamText(stream) +
                    (conditionalBody ? " is not capturing the body of an if node"
                                     : " captures the body of an if node") +
                    " (" + captureText(*s) + "); end it with " +
                    (conditionalBody ? "npuStreamEndCapture" : "npuStreamEndCaptureToIf"));
  }
  if (s->origin != stream.id()) {
    return fail(npuErrorStreamCaptureUnmatched, fn,
                streamText(stream) + " joined " + captureText(*s) + "; call " + end +
                    " on its origin stream " + std::to_string(s->origin));
  }
  if (s->mode != npuStreamCaptureModeRelaxed && s->thread != std::this_thread::get_id()) {
    return fail(npuErrorStreamCaptureWrongThread, fn,
                captureText(*s) +
                    " was begun by another thread (only relaxed captures may be "
                    "ended elsewhere); the capture goes on");
  }
  if (!s->openBodies.empty()) {
    return fail(npuErrorIllegalState, fn,
                "the body of an if node begun in " + captureText(*s) +
                    " is still being captured on stream " +
                    std::to_string(s->openBodies.front()->origin) +
                    "; end it with npuStreamEndCaptureToIf first (the capture goes on)");
  }
  r.finish(s);  // whatever the outcome, the capture is over
  ended = s;
  if (s->invalid) return invalidated(*s, fn);
  if (const uint64_t unjoined = s->unjoinedStream(); unjoined != 0) {
    return refuse(*s, npuErrorStreamCaptureUnjoined, fn,
                  "stream " + std::to_string(unjoined) + " forked into " + captureText(*s) +
                      " but its work was never joined back into the origin stream (record an "
                      "event on it and wait for that event on the origin stream)",
                  released);
  }
  // Open scopes end with the capture; an open task group is dropped.
  for (auto& [id, member] : s->members) {
    if (member.fusedOpen && !member.fusedNodes.empty()) {
      s->fused.push_back(FusedRange{member.fusedName, std::move(member.fusedNodes)});
    }
  }
  nodes = s->takeFusedNodes(groups);
  return npuSuccess;
}

npuError_t endCapture(Stream& stream, std::shared_ptr<Graph>& graph, const char* fn) {
  std::vector<GraphNode> released;
  std::vector<GraphNode> nodes;
  TaskGroups groups;
  SessionPtr s;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (const npuError_t status = endSession(r, stream, false, fn, s, nodes, groups, released);
      status != npuSuccess) {
    return status;
  }
  graph = std::make_shared<Graph>(s->id, s->device, std::move(nodes), std::move(groups));
  return npuSuccess;
}

void captureStatus(Stream& stream, npuStreamCaptureStatus& status, uint64_t& id) {
  status = npuStreamCaptureStatusNone;
  id = 0;
  if (!stream.capturing()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return;
  status = s->invalid ? npuStreamCaptureStatusInvalidated : npuStreamCaptureStatusActive;
  id = s->id;
}

namespace {

// The member of a capturing stream for the scope functions, or an error.
template <typename Body>
npuError_t withMember(Stream& stream, const char* fn, Body&& body) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) return fail(npuErrorIllegalState, fn, streamText(stream) + " is not capturing");
  if (s->invalid) return invalidated(*s, fn);
  return body(*s, s->members.at(stream.id()));
}

}  // namespace

npuError_t beginTaskGroup(Stream& stream, const char* fn) {
  return withMember(stream, fn, [&](CaptureSession& s, CaptureMember& m) {
    if (s.conditional != nullptr) {
      return fail(npuErrorNotSupported, fn,
                  streamText(stream) + " captures the body of an if node (" + captureText(s) +
                      "), where task groups are not supported: begin the group outside the if");
    }
    if (m.groupOpen) {
      return fail(npuErrorIllegalState, fn, streamText(stream) + " already has an open task group");
    }
    m.groupOpen = true;
    m.groupNodes.clear();
    return npuSuccess;
  });
}

npuError_t endTaskGroup(Stream& stream, npuTaskGroup_t& group, const char* fn) {
  return withMember(stream, fn, [&](CaptureSession& s, CaptureMember& m) {
    if (!m.groupOpen) {
      return fail(npuErrorIllegalState, fn, streamText(stream) + " has no open task group");
    }
    const npuTaskGroup_t id = gNextGroupId.fetch_add(1, std::memory_order_relaxed);
    s.groups.emplace(id, std::move(m.groupNodes));
    m.groupNodes.clear();
    m.groupOpen = false;
    group = id;
    return npuSuccess;
  });
}

npuError_t beginFusedScope(Stream& stream, const char* name, const char* fn) {
  return withMember(stream, fn, [&](CaptureSession&, CaptureMember& m) {
    if (m.fusedOpen) {
      return fail(npuErrorIllegalState, fn,
                  streamText(stream) + " already has an open fused scope");
    }
    m.fusedName = name != nullptr ? name : "fused";
    m.fusedOpen = true;
    m.fusedNodes.clear();
    return npuSuccess;
  });
}

npuError_t endFusedScope(Stream& stream, const char* fn) {
  return withMember(stream, fn, [&](CaptureSession& s, CaptureMember& m) {
    if (!m.fusedOpen) {
      return fail(npuErrorIllegalState, fn, streamText(stream) + " has no open fused scope");
    }
    if (!m.fusedNodes.empty()) s.fused.push_back(FusedRange{m.fusedName, std::move(m.fusedNodes)});
    m.fusedNodes.clear();
    m.fusedOpen = false;
    return npuSuccess;
  });
}

}  // namespace npurt::internal
