// Shared helpers of the graph tests (test_graph*.cpp): RAII owners of graphs
// and execs, capture-and-instantiate shortcuts, and a token whose
// destruction is counted (to see when a captured task is released).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test_util.h"

namespace npurt_test {

using npurt::GraphExecHandle;
using npurt::GraphHandle;

// Counts its own destruction: captured by a task's callable, it tells when
// the runtime released the task.
struct ReleaseToken {
  explicit ReleaseToken(std::atomic<int>& counter) : count(&counter) {}
  ReleaseToken(const ReleaseToken&) = delete;
  ReleaseToken& operator=(const ReleaseToken&) = delete;
  ~ReleaseToken() { count->fetch_add(1); }
  std::atomic<int>* count;
};

inline std::shared_ptr<ReleaseToken> makeToken(std::atomic<int>& counter) {
  return std::make_shared<ReleaseToken>(counter);
}

// Ends the capture on `stream` and returns the graph (fails the test if the
// capture failed).
inline GraphHandle endCapture(npuStream_t stream) {
  npuGraph_t graph = nullptr;
  EXPECT_NPU_OK(npuStreamEndCapture(stream, &graph));
  return GraphHandle(graph);
}

inline GraphExecHandle instantiate(npuGraph_t graph) {
  npuGraphExec_t exec = nullptr;
  EXPECT_NPU_OK(npuGraphInstantiate(&exec, graph, 0));
  return GraphExecHandle(exec);
}

inline size_t nodeCount(npuGraph_t graph) {
  size_t count = 0;
  EXPECT_NPU_OK(npuGraphGetNodeCount(graph, &count));
  return count;
}

inline npuStreamCaptureStatus captureStatus(npuStream_t stream) {
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  EXPECT_NPU_OK(npuStreamIsCapturing(stream, &status));
  return status;
}

// A thread-safe log of what ran, in order.
class RunLog {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(what);
  }
  std::vector<std::string> entries() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> entries_;
};

}  // namespace npurt_test
