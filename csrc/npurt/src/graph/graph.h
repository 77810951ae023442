// Graph: what a capture recorded, as nodes with dependencies (npuGraph_t).
//
// Nodes are stored in capture order, which is a topological order: a node
// depends only on nodes with smaller indices (a captured operation can only
// depend on operations captured before it). Execs and the DOT dump rely on
// this. A graph is immutable once built; execs share its node works
// (Note [Replayable tasks] in node_work.h).
//
// Thread safety: immutable after construction; every function is
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "node_work.h"
#include "npurt/npurt.h"

namespace npurt::internal {

struct GraphNode {
  NodeWorkPtr work;
  std::vector<uint32_t> deps;  // indices of earlier nodes, no duplicates
};

// Nodes of each task group, in capture order (npuStreamEndTaskGroup).
using TaskGroups = std::map<npuTaskGroup_t, std::vector<uint32_t>>;

class Graph {
 public:
  Graph(uint64_t captureId, int device, std::vector<GraphNode> nodes, TaskGroups groups) noexcept
      : captureId_(captureId),
        device_(device),
        nodes_(std::move(nodes)),
        groups_(std::move(groups)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  uint64_t captureId() const noexcept { return captureId_; }
  // Device of the capture's origin stream: where its execs run.
  int device() const noexcept { return device_; }
  const std::vector<GraphNode>& nodes() const noexcept { return nodes_; }
  const TaskGroups& groups() const noexcept { return groups_; }

  // Graphviz text of the graph (npuGraphDebugDotPrint).
  std::string dot() const;

 private:
  const uint64_t captureId_;
  const int device_;
  const std::vector<GraphNode> nodes_;
  const TaskGroups groups_;
};

}  // namespace npurt::internal
