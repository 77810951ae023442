// The registry of capturing streams and the shared capture helpers. See
// graph/capture_registry.h and Note [Stream capture].
#include "capture_registry.h"

#include <algorithm>
#include <utility>

#include "../errors.h"

namespace npurt::internal {
namespace {

// relaxed: ids only need to be unique.
std::atomic<uint64_t> gNextCaptureId{1};

}  // namespace

void Registry::start(const SessionPtr& session, Stream& origin) {
  live.reserve(live.size() + 1);
  byStream.emplace(origin.id(), session);
  live.push_back(session);  // capacity reserved: nothing throws from here
  liveCount.store(live.size(), std::memory_order_relaxed);
  origin.setCapturing(true);
}

void Registry::finish(const SessionPtr& session) {
  session->ended = true;
  for (auto& [id, member] : session->members) {
    member.stream->setCapturing(false);
    byStream.erase(id);
  }
  if (const SessionPtr parent = session->parent.lock())
    std::erase(parent->openBodies, session.get());
  std::erase(live, session);
  liveCount.store(live.size(), std::memory_order_relaxed);
}

Registry& registry() {
  static Registry* const r = std::make_unique<Registry>().release();
  return *r;
}

uint64_t newCaptureId() noexcept { return gNextCaptureId.fetch_add(1, std::memory_order_relaxed); }

std::string captureText(const CaptureSession& s) { return "capture " + std::to_string(s.id); }
std::string streamText(const Stream& s) { return "stream " + std::to_string(s.id()); }

npuError_t invalidated(const CaptureSession& s, const char* fn) {
  const char* end = s.conditional != nullptr ? "npuStreamEndCaptureToIf" : "npuStreamEndCapture";
  return fail(npuErrorStreamCaptureInvalidated, fn,
              captureText(s) + " was invalidated: " + s.reason + "; end it with " + end +
                  " and capture again");
}

npuError_t refuse(CaptureSession& s, npuError_t status, const char* fn, const std::string& why,
                  std::vector<GraphNode>& released) {
  s.invalidate(std::string(fn) + ": " + why, released);
  return fail(status, fn, why + "; " + captureText(s) + " is invalidated");
}

uint32_t addNode(CaptureSession& s, CaptureMember& m, const std::function<NodeWorkPtr()>& make) {
  GraphNode node;
  node.deps = m.frontier;
  s.nodes.reserve(s.nodes.size() + 1);
  m.frontier.reserve(1);
  if (m.groupOpen) m.groupNodes.reserve(m.groupNodes.size() + 1);
  if (m.fusedOpen) m.fusedNodes.reserve(m.fusedNodes.size() + 1);
  node.work = make();
  const auto index = static_cast<uint32_t>(s.nodes.size());
  s.nodes.push_back(std::move(node));
  m.frontier.assign(1, index);
  if (m.groupOpen) m.groupNodes.push_back(index);
  if (m.fusedOpen) m.fusedNodes.push_back(index);
  return index;
}

}  // namespace npurt::internal
