// CaptureSession: the state of one capture (graph/capture.h), and the
// fusing of its scopes into single nodes when it ends.
//
// Thread safety: a session is only touched under the capture registry's
// mutex (capture.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../stream.h"
#include "graph.h"
#include "npurt/npurt.h"

namespace npurt::internal {

// One stream taking part in a capture.
struct CaptureMember {
  std::shared_ptr<Stream> stream;
  std::vector<uint32_t> frontier;  // what the next captured node depends on
  bool groupOpen = false;          // npuStreamBeginTaskGroup ... End
  std::vector<uint32_t> groupNodes;
  bool fusedOpen = false;  // npuStreamBeginFusedScope ... End
  std::string fusedName;
  std::vector<uint32_t> fusedNodes;
};

// Nodes to fuse into one (consecutive nodes of one stream, a chain).
struct FusedRange {
  std::string name;
  std::vector<uint32_t> nodes;
};

class ConditionalWork;

class CaptureSession {
 public:
  CaptureSession(uint64_t id, npuStreamCaptureMode mode, std::shared_ptr<Stream> origin);
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  const uint64_t id;
  const npuStreamCaptureMode mode;
  const std::thread::id thread;  // that began the capture
  const int device;              // of the origin stream
  const uint64_t origin;         // id of the origin stream

  bool ended = false;    // npuStreamEndCapture (or the origin's destroy) ran
  bool invalid = false;  // see reason
  std::string reason;    // why the capture was invalidated
  std::vector<GraphNode> nodes;
  std::unordered_map<uint64_t, CaptureMember> members;  // by stream id
  TaskGroups groups;
  std::vector<FusedRange> fused;

  // Conditional bodies (Note [Conditional nodes] in csrc/npurt/README.md). A
  // body is a capture of its own whose nodes become the body of an if node
  // of its parent capture; captures nest as a tree, which is valid only as a
  // whole.
  std::weak_ptr<CaptureSession> parent;          // a body's parent capture
  std::shared_ptr<ConditionalWork> conditional;  // the if node a body fills; null for a root
  std::vector<CaptureSession*> openBodies;       // bodies begun in this capture, not ended

  // Whether a potentially unsafe call on thread `caller` is forbidden by
  // this capture (Note [Stream capture]).
  bool forbidsUnsafeCallsOn(std::thread::id caller) const noexcept {
    return mode == npuStreamCaptureModeGlobal ||
           (mode == npuStreamCaptureModeThreadLocal && caller == thread);
  }

  // Invalidates this capture and every capture of its tree (its parents and
  // their open bodies; first reason kept) and moves the recorded nodes into
  // `released`, for the caller to drop once it has let go of the registry.
  void invalidate(const std::string& why, std::vector<GraphNode>& released);

  // Id of a stream that forked into the capture and never joined the origin
  // again (its frontier is not behind the origin's), or 0.
  uint64_t unjoinedStream() const;

  // The captured nodes with every fused range made one node; groups are
  // renumbered to match. Consumes nodes, groups and fused.
  std::vector<GraphNode> takeFusedNodes(TaskGroups& groupsOut);

 private:
  // invalidate() of this capture and its open bodies.
  void invalidateSubtree(const std::string& why, std::vector<GraphNode>& released);
};

}  // namespace npurt::internal
