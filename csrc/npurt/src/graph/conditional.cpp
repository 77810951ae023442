// Conditional nodes: the if node's work and the capture of its body. See
// graph/conditional.h and Note [Conditional nodes] in csrc/npurt/README.md.
#include "conditional.h"

#include <mutex>
#include <string>
#include <utility>

#include "../errors.h"
#include "../memory.h"
#include "capture_registry.h"

namespace npurt::internal {

std::string ConditionalWork::describe() const {
  return "condition " + pointerText(condition_) + ", body of " + std::to_string(body_.size()) +
         (body_.size() == 1 ? " node" : " nodes");
}

int ConditionalWork::run(char* errorBuf, size_t errorBufSize) noexcept {
  if (*condition_ == 0) return 0;
  for (const GraphNode& node : body_) {
    const int status = node.work->run(errorBuf, errorBufSize);
    if (status != 0) {
      prefixNodeName(node.work->name(), errorBuf, errorBufSize);
      return status;
    }
  }
  return 0;
}

void ConditionalWork::appendAccesses(std::vector<racecheck::Access>& out) const {
  const auto at = reinterpret_cast<uintptr_t>(condition_);
  out.push_back(racecheck::Access{at, at + 1, true, false});
  for (const GraphNode& node : body_) node.work->appendAccesses(out);
}

npuError_t beginCaptureToIf(Stream& stream, const void* condition,
                            std::shared_ptr<Allocation> alloc, Stream& body, const char* fn) {
  std::vector<GraphNode> released;  // dropped after the lock (tasks' releases)
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const SessionPtr s = r.find(stream);
  if (s == nullptr) {
    return fail(npuErrorIllegalState, fn,
                streamText(stream) + " is not capturing (an if node is added to a capture)");
  }
  if (s->invalid) return invalidated(*s, fn);
  if (const SessionPtr other = r.find(body)) {
    return fail(npuErrorIllegalState, fn,
                "the body stream " + std::to_string(body.id()) + " is already capturing (" +
                    captureText(*other) + "); use a stream that does not capture");
  }
  if (body.device() != s->device || alloc->device != s->device) {
    return fail(npuErrorInvalidValue, fn,
                "the body stream is on device " + std::to_string(body.device()) +
                    " and the condition in memory of device " + std::to_string(alloc->device) +
                    ", but " + captureText(*s) + " is on device " + std::to_string(s->device) +
                    " (a capture cannot span devices)");
  }
  CaptureMember& member = s->members.at(stream.id());
  if (member.groupOpen) {
    return fail(npuErrorNotSupported, fn,
                streamText(stream) +
                    " has an open task group, and an if node cannot be part of "
                    "one: end the group first");
  }
  auto work = std::make_shared<ConditionalWork>(condition, std::move(alloc));
  auto bodySession =
      std::make_shared<CaptureSession>(newCaptureId(), s->mode, body.shared_from_this());
  bodySession->parent = s;
  bodySession->conditional = work;
  s->openBodies.reserve(s->openBodies.size() + 1);
  addNode(*s, member, [&] { return work; });
  try {
    r.start(bodySession, body);
  } catch (...) {
    // The node is recorded without a body: the capture cannot be used.
    s->invalidate(std::string(fn) + ": out of memory", released);
    throw;
  }
  s->openBodies.push_back(bodySession.get());  // capacity reserved
  return npuSuccess;
}

npuError_t endCaptureToIf(Stream& body, const char* fn) {
  std::vector<GraphNode> released;
  std::vector<GraphNode> nodes;
  TaskGroups groups;  // stays empty: task groups are refused in bodies
  SessionPtr s;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (const npuError_t status = endSession(r, body, true, fn, s, nodes, groups, released);
      status != npuSuccess) {
    return status;
  }
  s->conditional->setBody(std::move(nodes));
  return npuSuccess;
}

}  // namespace npurt::internal
