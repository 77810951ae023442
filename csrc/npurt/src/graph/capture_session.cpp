// CaptureSession: invalidation, the unjoined-fork check and fusing.
// See graph/capture_session.h and Note [Stream capture].
#include "capture_session.h"

#include <algorithm>
#include <utility>

namespace npurt::internal {

CaptureSession::CaptureSession(uint64_t captureId, npuStreamCaptureMode captureMode,
                               std::shared_ptr<Stream> originStream)
    : id(captureId),
      mode(captureMode),
      thread(std::this_thread::get_id()),
      device(originStream->device()),
      origin(originStream->id()) {
  members[origin].stream = std::move(originStream);
}

void CaptureSession::invalidate(const std::string& why, std::vector<GraphNode>& released) {
  // A broken body breaks its if node, so the whole tree: start at its root.
  std::shared_ptr<CaptureSession> root;
  for (auto p = parent.lock(); p != nullptr; p = p->parent.lock()) root = p;
  (root != nullptr ? *root : *this).invalidateSubtree(why, released);
}

void CaptureSession::invalidateSubtree(const std::string& why, std::vector<GraphNode>& released) {
  for (CaptureSession* body : openBodies) body->invalidateSubtree(why, released);
  if (!invalid) {
    invalid = true;
    reason = why;
  }
  // The nodes will never run: release their tasks now, not at the end.
  for (GraphNode& node : nodes) released.push_back(std::move(node));
  nodes.clear();
  groups.clear();
  fused.clear();
  for (auto& entry : members) {
    CaptureMember& member = entry.second;
    member.frontier.clear();
    member.groupNodes.clear();
    member.fusedNodes.clear();
  }
}

uint64_t CaptureSession::unjoinedStream() const {
  // Everything the origin's frontier depends on, itself included: a forked
  // stream has joined iff its own frontier lies inside.
  std::vector<bool> behindOrigin(nodes.size(), false);
  std::vector<uint32_t> todo = members.at(origin).frontier;
  while (!todo.empty()) {
    const uint32_t n = todo.back();
    todo.pop_back();
    if (behindOrigin[n]) continue;
    behindOrigin[n] = true;
    for (const uint32_t dep : nodes[n].deps) todo.push_back(dep);
  }
  for (const auto& [streamId, member] : members) {
    if (streamId == origin) continue;
    for (const uint32_t n : member.frontier) {
      if (!behindOrigin[n]) return streamId;
    }
  }
  return 0;
}

std::vector<GraphNode> CaptureSession::takeFusedNodes(TaskGroups& groupsOut) {
  constexpr uint32_t kNone = UINT32_MAX;
  // rangeOf[n]: the fused range holding node n.
  std::vector<uint32_t> rangeOf(nodes.size(), kNone);
  for (uint32_t r = 0; r < fused.size(); ++r) {
    for (const uint32_t n : fused[r].nodes) rangeOf[n] = r;
  }
  std::vector<uint32_t> newIndex(nodes.size(), kNone);
  std::vector<uint32_t> rangeNode(fused.size(), kNone);
  std::vector<GraphNode> out;
  out.reserve(nodes.size());
  const auto mapDeps = [&](const std::vector<uint32_t>& deps, uint32_t self) {
    std::vector<uint32_t> mapped;
    for (const uint32_t d : deps) {
      const uint32_t m = newIndex[d];
      if (m != self && std::find(mapped.begin(), mapped.end(), m) == mapped.end()) {
        mapped.push_back(m);
      }
    }
    return mapped;
  };
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    const uint32_t r = rangeOf[n];
    if (r == kNone) {
      const auto self = static_cast<uint32_t>(out.size());
      out.push_back(GraphNode{std::move(nodes[n].work), mapDeps(nodes[n].deps, self)});
      newIndex[n] = self;
      continue;
    }
    if (rangeNode[r] == kNone) {
      // The range's first node: the fused node takes its place. Only the
      // first member has dependencies outside the range (a fused scope
      // cannot wait on events), so the order stays topological.
      rangeNode[r] = static_cast<uint32_t>(out.size());
      std::vector<NodeWorkPtr> parts;
      for (const uint32_t m : fused[r].nodes) parts.push_back(nodes[m].work);
      out.push_back(GraphNode{makeFusedWork(fused[r].name, std::move(parts)),
                              mapDeps(nodes[n].deps, rangeNode[r])});
    }
    newIndex[n] = rangeNode[r];
  }
  for (auto& [group, groupNodes] : groups) {
    std::vector<uint32_t> mapped;
    for (const uint32_t n : groupNodes) mapped.push_back(newIndex[n]);
    groupsOut.emplace(group, std::move(mapped));
  }
  nodes.clear();
  groups.clear();
  fused.clear();
  return out;
}

}  // namespace npurt::internal
