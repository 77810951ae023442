// GraphExec: an instantiated graph (npuGraphExec_t) and its launches.
// See Note [Graph launch] in csrc/npurt/README.md.
//
// Instantiation splits the graph's nodes into *lanes*: chains of nodes that
// run one after another on one stream. Lane 0 is the launch stream itself
// (a chain-shaped graph then needs no event at all); lanes 1.. are internal
// streams of the device (never visible as a handle). A node goes on the lane of a dependency whose
// last node it is, else on a new lane, at most one lane per executor core (then on the lane that
// has been idle longest in the plan); a dependency across lanes becomes an event record after the
// dependency and a wait before the node. The plan (`steps_`) lists these in the graph's topological
// order, so every wait refers to a record enqueued before it: a launch cannot deadlock.
//
// A launch on stream S enqueues:
//   S:         [wait for the previous launch's end] start, record(start)
//   S (lane 0) and lanes 1..: [lanes: wait(start)] the plan's nodes, records
//              and waits, [lanes: lane end, record(end_i)]
//   S:         wait(end_i) for every lane i > 0, join, record(launch end)
// so nodes start after S's earlier work, lanes run concurrently on the
// executors (a waiting lane is parked and holds no core), and S's later work
// waits for the join. Launches of one exec never overlap: a launch's lanes
// start after the previous launch's end. Node tasks are persistent
// (one per node, made at instantiation, never freed by the executor), so a
// launch of an n-node chain enqueues n + 3 tasks; each further lane adds 5
// and each edge across lanes a record and a wait.
//
// Failure: a node never fails its lane. Its failure is kept in the exec;
// nodes not yet started are skipped; the join task then fails on S with the
// node's name and message, so S reports it per Note [Task failure rule]. A
// fault injected into a node fails its stream like any task's: on lane 0
// that is S, which reports it; on another lane the join takes it from the
// lane and reports it. A launch whose start is discarded (S holds a failure)
// skips every node.
//
// Thread safety: launch() and updateGroup() are thread-safe. Start, node
// and join tasks run on executors in the order the events impose, which is
// what orders their accesses to the per-launch fields.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../event.h"
#include "../stream.h"
#include "graph.h"

namespace npurt::internal {

class Runtime;

class GraphExec : public std::enable_shared_from_this<GraphExec> {
 public:
  // Plans the lanes and creates their streams on the graph's device.
  static std::shared_ptr<GraphExec> instantiate(Runtime& rt, const Graph& graph);

  // Use instantiate() (public for make_shared only).
  struct Private {};
  GraphExec(Private, const Graph& graph);
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec();

  // Enqueues one launch on `stream` (see the file comment). Throws
  // std::bad_alloc; a launch cut short by it runs the nodes it enqueued.
  void launch(Runtime& rt, Stream& stream);

  // npuGraphExecUpdateTaskGroup: checks, then queues the new works for the
  // next launch's start task. Returns the status (message set).
  npuError_t updateGroup(npuTaskGroup_t group, const npuTask* tasks, size_t count, const char* fn);

  // For the tasks of a launch (exec.cpp).
  class NodeTask;
  class StartTask;
  class JoinTask;
  class LaneEndTask;

 private:
  struct Step {
    enum class Kind : uint8_t { kNode, kRecord, kWait } kind;
    uint32_t lane;
    uint32_t index;  // node index (kNode) or record slot (kRecord, kWait)
  };

  void plan(const Graph& graph, size_t maxLanes);
  void createLanes(Runtime& rt);

  // The per-launch protocol (start task, node tasks, join task).
  // Applies the updates made before launch `sequence` was issued.
  void startLaunch(uint64_t sequence) noexcept;
  void skipLaunch() noexcept { skip_ = true; }
  bool skipping() const noexcept { return skip_ || failed_.load(std::memory_order_acquire); }
  void noteFailure(const char* name, const char* message) noexcept;
  // The launch's failure, if any: node name and message; resets the state.
  bool takeFailure(std::string& name, std::string& message) noexcept;

  const int device_;
  std::vector<NodeWorkPtr> works_;  // per node; swapped only by startLaunch()
  std::vector<NodeKind> kinds_;     // per node; immutable (updates keep kinds)
  std::vector<std::unique_ptr<NodeTask>> nodeTasks_;
  std::vector<uint32_t> laneOf_;
  std::vector<Step> steps_;
  uint32_t slots_ = 0;
  std::vector<std::shared_ptr<Stream>> lanes_;  // [0] null: the launch stream
  const TaskGroups groups_;

  std::mutex launchMutex_;  // serialises launch(); guards the three below
  std::shared_ptr<EventVersion> lastEnd_;
  uint64_t lastStream_ = 0;
  uint64_t launches_ = 0;  // launches issued: the next one's sequence number

  // An update for the launches issued from `fromLaunch` on.
  struct PendingUpdate {
    uint64_t fromLaunch;
    uint32_t node;
    NodeWorkPtr work;
  };
  std::mutex updateMutex_;  // guards pending_ (taken after launchMutex_)
  std::vector<PendingUpdate> pending_;

  // Per launch, ordered by the launch's events (see the class comment).
  bool skip_ = false;
  std::atomic<bool> failed_{false};
  std::mutex failureMutex_;  // guards the three below
  bool nodeFailed_ = false;  // a node's run failed (noteFailure)
  std::string failedName_;
  std::string failedMessage_;
};

}  // namespace npurt::internal
