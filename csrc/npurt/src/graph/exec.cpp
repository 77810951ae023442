// GraphExec: lane planning, launch and the tasks of a launch.
// See graph/exec.h and Note [Graph launch] in csrc/npurt/README.md.
#include "exec.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "../api_common.h"

namespace npurt::internal {

// A node of the graph on its lane. Persistent: made at instantiation and
// enqueued by every launch; the executor's dispose() leaves it alone.
class GraphExec::NodeTask final : public Task {
 public:
  NodeTask(GraphExec& exec, uint32_t index) noexcept
      : Task(TaskKind::kWork), exec_(exec), index_(index) {}
  npuActivityKind activityKind() const noexcept override { return npuActivityKindGraph; }
  const char* name() const noexcept override { return exec_.works_[index_]->name(); }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    if (exec_.skipping()) return 0;  // an earlier node failed, or the launch was discarded
    const int status = exec_.works_[index_]->run(errorBuf, errorBufSize);
    if (status != 0) {
      errorBuf[errorBufSize - 1] = '\0';
      exec_.noteFailure(name(), errorBuf);
    }
    return 0;  // the lane never fails: the join reports it (exec.h)
  }
  // Discarded behind a failure of its stream (an injected fault in a node,
  // or, on lane 0, any failure of the launch stream): the nodes not started
  // yet are skipped. The stream's own failure is the one reported.
  void discard() noexcept override { exec_.failed_.store(true, std::memory_order_release); }
  void dispose() noexcept override {}
  // On the executor, so the work is the one this launch runs.
  void appendAccesses(std::vector<racecheck::Access>& out) const override {
    exec_.works_[index_]->appendAccesses(out);
  }

 private:
  GraphExec& exec_;
  const uint32_t index_;
};

// First task of a launch on the launch stream: holds the exec, applies
// pending updates and resets the launch state.
class GraphExec::StartTask final : public Task {
 public:
  StartTask(std::shared_ptr<GraphExec> exec, uint64_t sequence) noexcept
      : Task(TaskKind::kControl), exec_(std::move(exec)), sequence_(sequence) {}
  const char* name() const noexcept override { return "npuGraphLaunch"; }
  npuActivityKind activityKind() const noexcept override { return npuActivityKindGraph; }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override {
    exec_->startLaunch(sequence_);
    return 0;
  }
  // The launch stream holds a failure: the launch is discarded like any
  // work behind it (Note [Task failure rule]); its nodes are skipped.
  void discard() noexcept override {
    exec_->startLaunch(sequence_);
    exec_->skipLaunch();
  }

 private:
  std::shared_ptr<GraphExec> exec_;
  const uint64_t sequence_;
};

// Last task of a launch on the launch stream, after every lane's end: fails
// with the failing node's name and message, if one failed.
class GraphExec::JoinTask final : public Task {
 public:
  explicit JoinTask(std::shared_ptr<GraphExec> exec) noexcept
      : Task(TaskKind::kControl), exec_(std::move(exec)) {}
  const char* name() const noexcept override {
    return failedName_.empty() ? "npuGraphLaunch" : failedName_.c_str();
  }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    std::string message;
    if (!exec_->takeFailure(failedName_, message)) return 0;
    std::snprintf(errorBuf, errorBufSize, "%s", message.c_str());
    return 1;
  }
  void discard() noexcept override {
    std::string message;
    (void)exec_->takeFailure(failedName_, message);  // the stream's own failure wins
  }

 private:
  std::shared_ptr<GraphExec> exec_;
  std::string failedName_;
};

// Last task of a launch on each lane, before the lane's end record: holds
// the exec until the lane's node tasks are behind it, in every order of
// disposal (shutdown included), and lets it go before the end record runs,
// so that the exec is released by the time the launch stream passes the
// join (a record is disposed only after its stream moved on).
class GraphExec::LaneEndTask final : public Task {
 public:
  explicit LaneEndTask(std::shared_ptr<GraphExec> exec) noexcept
      : Task(TaskKind::kControl), exec_(std::move(exec)) {}
  const char* name() const noexcept override { return "npuGraphLaunch(lane end)"; }
  npuActivityKind activityKind() const noexcept override { return npuActivityKindGraph; }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override { return 0; }

 private:
  std::shared_ptr<GraphExec> exec_;
};

namespace {

// Enqueues an event record on `stream` and returns its version.
std::shared_ptr<EventVersion> recordOn(Runtime& rt, Stream& stream) {
  const std::shared_ptr<EventRecordTask> task = EventRecordTask::create(stream);
  uint64_t ticket = 0;
  try {
    ticket = submit(rt, stream, InlineTask::heap(task.get()));
  } catch (...) {
    task->discard();  // completes the version: nobody may wait for it forever
    task->dispose();
    throw;
  }
  task->version().setTicket(ticket);  // Note [Completion order]
  return std::shared_ptr<EventVersion>(task, &task->version());
}

void waitOn(Runtime& rt, Stream& stream, std::shared_ptr<EventVersion> version) {
  submit(rt, stream, makeTask<EventWaitTask>(std::move(version)));
}

}  // namespace

GraphExec::GraphExec(Private /*unused*/, const Graph& graph)
    : device_(graph.device()), groups_(graph.groups()) {
  works_.reserve(graph.nodes().size());
  for (const GraphNode& node : graph.nodes()) {
    works_.push_back(node.work);
    kinds_.push_back(node.work->kind());
  }
}

std::shared_ptr<GraphExec> GraphExec::instantiate(Runtime& rt, const Graph& graph) {
  auto exec = std::make_shared<GraphExec>(Private{}, graph);
  for (uint32_t i = 0; i < exec->works_.size(); ++i) {
    exec->nodeTasks_.push_back(std::make_unique<NodeTask>(*exec, i));
  }
  Device& device = rt.device(exec->device_);
  exec->plan(graph, static_cast<size_t>(std::max(2, device.executor().cores())));
  exec->createLanes(rt);
  return exec;
}

GraphExec::~GraphExec() {
  // Every launch has finished (each held a reference). Lanes are dropped
  // from the device's list at its next prune (not here: this may run inside
  // a shutdown that holds that list's mutex).
  for (const std::shared_ptr<Stream>& lane : lanes_) {
    if (lane != nullptr) lane->markDestroyed();
  }
}

void GraphExec::createLanes(Runtime& rt) {
  Device& device = rt.device(device_);
  device.executor().start();  // Note [Executor thread start]
  const auto count = laneOf_.empty() ? 0 : *std::max_element(laneOf_.begin(), laneOf_.end()) + 1;
  if (count > 0) lanes_.push_back(nullptr);  // lane 0 is the launch stream
  for (uint32_t i = 1; i < count; ++i) {
    // An id no handle will ever carry: lanes are internal.
    auto lane = std::make_shared<Stream>(rt.streams.newId(), device_, npuStreamNonBlocking,
                                         kLeastPriority, device.executor());
    device.addStream(lane);  // device synchronize waits for graph work too
    lanes_.push_back(std::move(lane));
  }
}

void GraphExec::plan(const Graph& graph, size_t maxLanes) {
  constexpr uint32_t kNone = UINT32_MAX;
  const std::vector<GraphNode>& nodes = graph.nodes();
  const auto count = static_cast<uint32_t>(nodes.size());
  laneOf_.assign(count, 0);
  std::vector<uint32_t> tail;  // last node of each lane so far
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t lane = kNone;
    // Behind a dependency that ends its lane: the stream's order is the edge.
    for (const uint32_t d : nodes[i].deps) {
      if (tail[laneOf_[d]] == d) {
        lane = laneOf_[d];
        break;
      }
    }
    if (lane == kNone && tail.size() < maxLanes) {
      lane = static_cast<uint32_t>(tail.size());
      tail.push_back(i);
    } else if (lane == kNone) {
      // The lane whose last node comes first: the least false ordering.
      lane = static_cast<uint32_t>(std::min_element(tail.begin(), tail.end()) - tail.begin());
    }
    laneOf_[i] = lane;
    tail[lane] = i;
  }
  // A record after each node that a node of another lane depends on.
  std::vector<uint32_t> slotOf(count, kNone);
  for (uint32_t i = 0; i < count; ++i) {
    for (const uint32_t d : nodes[i].deps) {
      if (laneOf_[d] != laneOf_[i] && slotOf[d] == kNone) slotOf[d] = slots_++;
    }
  }
  // waited[l][s]: the latest node of lane s that lane l already waits for
  // (a lane runs its nodes in order, so waiting for it covers earlier ones).
  std::vector<std::vector<int64_t>> waited(tail.size(), std::vector<int64_t>(tail.size(), -1));
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t lane = laneOf_[i];
    for (const uint32_t d : nodes[i].deps) {
      const uint32_t source = laneOf_[d];
      if (source == lane || static_cast<int64_t>(d) <= waited[lane][source]) continue;
      steps_.push_back(Step{Step::Kind::kWait, lane, slotOf[d]});
      waited[lane][source] = d;
    }
    steps_.push_back(Step{Step::Kind::kNode, lane, i});
    if (slotOf[i] != kNone) steps_.push_back(Step{Step::Kind::kRecord, lane, slotOf[i]});
  }
}

void GraphExec::launch(Runtime& rt, Stream& stream) {
  std::lock_guard<std::mutex> lock(launchMutex_);
  const std::shared_ptr<GraphExec> self = shared_from_this();
  // Launches of one exec never overlap; on the same stream its order does it.
  if (lastEnd_ != nullptr && lastStream_ != stream.id() && !lastEnd_->done()) {
    waitOn(rt, stream, lastEnd_);
  }
  submit(rt, stream, makeTask<StartTask>(self, launches_++));
  if (lanes_.size() > 1) {
    const std::shared_ptr<EventVersion> start = recordOn(rt, stream);
    for (size_t i = 1; i < lanes_.size(); ++i) waitOn(rt, *lanes_[i], start);
  }
  std::vector<std::shared_ptr<EventVersion>> versions(slots_);
  for (const Step& step : steps_) {
    Stream& lane = step.lane == 0 ? stream : *lanes_[step.lane];
    switch (step.kind) {
      case Step::Kind::kNode:
        submit(rt, lane, InlineTask::heap(nodeTasks_[step.index].get()));  // persistent
        break;
      case Step::Kind::kRecord:
        versions[step.index] = recordOn(rt, lane);
        break;
      case Step::Kind::kWait:
        waitOn(rt, lane, versions[step.index]);
        break;
    }
  }
  std::vector<std::shared_ptr<EventVersion>> ends;
  ends.reserve(lanes_.size());
  for (size_t i = 1; i < lanes_.size(); ++i) {
    submit(rt, *lanes_[i], makeTask<LaneEndTask>(self));
    ends.push_back(recordOn(rt, *lanes_[i]));
  }
  for (std::shared_ptr<EventVersion>& end : ends) waitOn(rt, stream, std::move(end));
  submit(rt, stream, makeTask<JoinTask>(self));
  lastEnd_ = recordOn(rt, stream);
  lastStream_ = stream.id();
}

void GraphExec::startLaunch(uint64_t sequence) noexcept {
  // The previous launch has ended (exec.h), so no node reads works_ now.
  // The works replaced are released after the mutex is dropped.
  std::vector<NodeWorkPtr> replaced;
  {
    std::lock_guard<std::mutex> lock(updateMutex_);
    // Updates are in the order they were made, and their launch numbers
    // only grow: the ones due form a prefix.
    size_t due = 0;
    while (due < pending_.size() && pending_[due].fromLaunch <= sequence) ++due;
    try {
      replaced.reserve(due);
    } catch (...) {
      due = 0;  // out of memory: apply them at the next launch
    }
    for (size_t i = 0; i < due; ++i) {
      works_[pending_[i].node].swap(pending_[i].work);
      replaced.push_back(std::move(pending_[i].work));
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(due));
  }
  skip_ = false;
  std::lock_guard<std::mutex> lock(failureMutex_);
  nodeFailed_ = false;
  failedName_.clear();
  failedMessage_.clear();
  failed_.store(false, std::memory_order_release);
}

void GraphExec::noteFailure(const char* name, const char* message) noexcept {
  std::lock_guard<std::mutex> lock(failureMutex_);
  if (failed_.load(std::memory_order_relaxed)) return;  // the first failure wins
  nodeFailed_ = true;
  try {
    failedName_ = name;
    failedMessage_ = message[0] != '\0' ? message : "(no message)";
  } catch (...) {
    failedName_.clear();  // out of memory: report without the details
    failedMessage_.clear();
  }
  // release: nodes on other lanes that see the flag skip their work.
  failed_.store(true, std::memory_order_release);
}

bool GraphExec::takeFailure(std::string& name, std::string& message) noexcept {
  // A fault injected into a node of lane i > 0 fails that internal stream
  // (exec.h): take it, so the lane is clean for the next launch, and report
  // it through the join. One injected into lane 0 failed the launch stream
  // itself, which reports it: nothing to add here.
  std::string laneMessage;
  for (size_t i = 1; i < lanes_.size(); ++i) {
    std::string text;
    try {
      if (lanes_[i]->takeFailure(text) && laneMessage.empty()) laneMessage = std::move(text);
    } catch (...) {
      laneMessage = "a graph node failed";
    }
  }
  std::lock_guard<std::mutex> lock(failureMutex_);
  const bool failed = nodeFailed_ || !laneMessage.empty();
  try {
    if (nodeFailed_) {
      name = failedName_.empty() ? "npuGraphLaunch" : failedName_;
      message = failedMessage_.empty() ? "a graph node failed" : failedMessage_;
    } else if (failed) {
      name = "npuGraphLaunch";
      message = laneMessage;
    }
  } catch (...) {
    name.clear();
    message.clear();
  }
  nodeFailed_ = false;
  failedName_.clear();
  failedMessage_.clear();
  failed_.store(false, std::memory_order_relaxed);
  return failed;
}

npuError_t GraphExec::updateGroup(npuTaskGroup_t group, const npuTask* tasks, size_t count,
                                  const char* fn) {
  const auto it = groups_.find(group);
  if (it == groups_.end()) {
    return fail(npuErrorInvalidValue, fn,
                "task group " + std::to_string(group) + " is not a group of this graph");
  }
  const std::vector<uint32_t>& nodes = it->second;
  if (count != nodes.size()) {
    return fail(npuErrorGraphExecUpdateFailure, fn,
                "task group " + std::to_string(group) + " has " + std::to_string(nodes.size()) +
                    " nodes, got " + std::to_string(count) + " tasks");
  }
  if (count > 0 && tasks == nullptr) return nullArgument(fn, "tasks");
  for (size_t i = 0; i < count; ++i) {
    if (tasks[i].run == nullptr) return nullArgument(fn, "tasks[i].run");
    if ((tasks[i].flags & ~(npuTaskCopyName | npuTaskNotReplayable)) != 0u) {
      return fail(npuErrorInvalidValue, fn, "unknown task flags " + std::to_string(tasks[i].flags));
    }
    if (kinds_[nodes[i]] != NodeKind::kTask) {
      return fail(npuErrorGraphExecUpdateFailure, fn,
                  "node " + std::to_string(i) + " of task group " + std::to_string(group) +
                      " is a " + nodeKindName(kinds_[nodes[i]]) +
                      " node; only task nodes (npuLaunchTask) can be updated");
    }
  }
  std::vector<NodeWorkPtr> made;
  const auto disownAll = [&] {
    for (const NodeWorkPtr& work : made) work->disown();  // the caller keeps its tasks
  };
  try {
    made.reserve(count);
    for (size_t i = 0; i < count; ++i) made.push_back(makeTaskWork(tasks[i]));
  } catch (...) {
    disownAll();
    throw;
  }
  // For the launches issued from now on; those issued before keep the old
  // tasks (their start tasks have a smaller number).
  std::lock_guard<std::mutex> launchLock(launchMutex_);
  std::lock_guard<std::mutex> lock(updateMutex_);
  try {
    pending_.reserve(pending_.size() + count);
  } catch (...) {
    disownAll();
    throw;
  }
  for (size_t i = 0; i < count; ++i) {  // capacity reserved: no throw
    pending_.push_back(PendingUpdate{launches_, nodes[i], std::move(made[i])});
  }
  return npuSuccess;
}

}  // namespace npurt::internal
