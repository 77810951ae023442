// The registry of capturing streams, and the helpers the capture entry
// points share (graph/capture.cpp, graph/conditional.cpp).
//
// Thread safety: everything here is used under Registry::mutex, except
// registry() and newCaptureId(), which are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../stream.h"
#include "capture_session.h"
#include "graph.h"
#include "npurt/npurt.h"

namespace npurt::internal {

using SessionPtr = std::shared_ptr<CaptureSession>;

class Registry {
 public:
  std::mutex mutex;  // guards everything below and every session
  std::unordered_map<uint64_t, SessionPtr> byStream;
  std::vector<SessionPtr> live;  // sessions not ended
  // live.size(), readable without the mutex: checkUnsafeCall's fast path.
  std::atomic<size_t> liveCount{0};

  SessionPtr find(const Stream& stream) const {
    const auto it = byStream.find(stream.id());
    return it == byStream.end() ? nullptr : it->second;
  }

  // Makes `session` live, with its origin stream capturing. Throws only
  // before changing anything.
  void start(const SessionPtr& session, Stream& origin);
  // Ends a session: every member stops capturing, and a conditional body
  // leaves its parent's open bodies.
  void finish(const SessionPtr& session);
};

// The process's registry; never destroyed, like the runtime (Note [Runtime
// lifetime]).
Registry& registry();

// A process-unique capture id (roots and conditional bodies).
uint64_t newCaptureId() noexcept;

std::string captureText(const CaptureSession& s);
std::string streamText(const Stream& s);

// The error for an operation on an invalidated capture.
npuError_t invalidated(const CaptureSession& s, const char* fn);

// Invalidates `s` (and the captures it is part of) because `fn` is not
// permitted, returning the status.
npuError_t refuse(CaptureSession& s, npuError_t status, const char* fn, const std::string& why,
                  std::vector<GraphNode>& released);

// Records a node made by make() on `stream`'s member `m` of `s`: it depends
// on the member's frontier and becomes it. The slot is reserved before make()
// runs and nothing throws after it, so a task is either recorded or left to
// the caller (never released on an error: npuLaunchTask contract). Returns
// the node's index.
uint32_t addNode(CaptureSession& s, CaptureMember& m, const std::function<NodeWorkPtr()>& make);

// The end of the capture whose origin is `stream`: a root capture
// (npuStreamEndCapture) or, with `conditionalBody`, the body of an if node
// (npuStreamEndCaptureToIf). Checks the stream, the thread and that no body
// begun in it is still open (those errors leave the capture going on), then
// ends it (`ended`); a valid capture gives its `nodes` (fused scopes made
// single nodes) and task `groups`. Caller holds the registry's mutex.
npuError_t endSession(Registry& r, Stream& stream, bool conditionalBody, const char* fn,
                      SessionPtr& ended, std::vector<GraphNode>& nodes, TaskGroups& groups,
                      std::vector<GraphNode>& released);

}  // namespace npurt::internal
