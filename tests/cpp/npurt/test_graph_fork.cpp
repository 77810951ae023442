// Covers captures across streams and what a launch does with them: fork and
// join through events, independent branches running concurrently, an
// unjoined fork, waits that would break the capture's isolation; failures
// during a launch (a failing node, an injected fault, a launch stream that
// already failed); task group updates and fused scopes. See Note [Stream
// capture] and Note [Graph launch] in csrc/npurt/README.md.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_graph_util.h"

namespace npurt_test {
namespace {

class GraphForkTest : public NpurtTest {};

// Records an event on `from` and makes `to` wait on it.
void link(npuStream_t from, npuStream_t to, npuEvent_t e) {
  ASSERT_NPU_OK(npuEventRecord(e, from));
  ASSERT_NPU_OK(npuStreamWaitEvent(to, e, 0));
}

TEST_F(GraphForkTest, ForkAndJoinCaptureBothStreamsInOrder) {
  auto s0 = makeStream();
  auto s1 = makeStream();
  auto fork = makeEvent();
  auto join = makeEvent();
  RunLog log;
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s0.get(), "a", [&log] { log.add("a"); }));
  link(s0.get(), s1.get(), fork.get());
  uint64_t id0 = 0;
  uint64_t id1 = 0;
  npuStreamCaptureStatus status{};
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s0.get(), &status, &id0));
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s1.get(), &status, &id1));
  EXPECT_EQ(status, npuStreamCaptureStatusActive);  // s1 joined the capture
  EXPECT_EQ(id0, id1);
  ASSERT_NPU_OK(npurt::launch(s1.get(), "b", [&log] { log.add("b"); }));
  link(s1.get(), s0.get(), join.get());
  ASSERT_NPU_OK(npurt::launch(s0.get(), "c", [&log] { log.add("c"); }));
  // Only the origin ends the capture.
  npuGraph_t wrong = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureUnmatched, npuStreamEndCapture(s1.get(), &wrong));
  GraphHandle graph = endCapture(s0.get());
  EXPECT_EQ(captureStatus(s1.get()), npuStreamCaptureStatusNone);
  EXPECT_EQ(nodeCount(graph.get()), 3u);
  EXPECT_TRUE(log.entries().empty());
  GraphExecHandle exec = instantiate(graph.get());
  for (int i = 0; i < 3; ++i) {
    log.clear();
    ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s1.get()));  // any stream may launch it
    ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
    EXPECT_EQ(log.entries(), (std::vector<std::string>{"a", "b", "c"}));
  }
}

// Two branches that each wait until the other has started: they finish
// only if the launch runs them at the same time (the default two cores).
TEST_F(GraphForkTest, IndependentBranchesRunConcurrently) {
  auto s0 = makeStream();
  auto s1 = makeStream();
  auto fork = makeEvent();
  auto join = makeEvent();
  auto left = std::make_shared<Gate>();
  auto right = std::make_shared<Gate>();
  std::atomic<int> met{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  link(s0.get(), s1.get(), fork.get());
  ASSERT_NPU_OK(npurt::launch(s0.get(), "left", [=, &met] {
    left->open();
    if (right->waitFor(kHangTimeout)) met++;
  }));
  ASSERT_NPU_OK(npurt::launch(s1.get(), "right", [=, &met] {
    right->open();
    if (left->waitFor(kHangTimeout)) met++;
  }));
  link(s1.get(), s0.get(), join.get());
  GraphHandle graph = endCapture(s0.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s0.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s0.get()));
  EXPECT_EQ(met.load(), 2);
}

TEST_F(GraphForkTest, NodeAfterAJoinWaitsForEveryBranch) {
  auto s0 = makeStream();
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  std::atomic<int> done{0};
  std::atomic<int> seen{-1};
  ASSERT_NPU_OK(npuSetTaskDelay(5'000));  // makes a missing edge visible
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  link(s0.get(), s1.get(), e.get());
  link(s0.get(), s2.get(), e.get());
  for (npuStream_t s : {s0.get(), s1.get(), s2.get()}) {
    for (int i = 0; i < 3; ++i) ASSERT_NPU_OK(npurt::launch(s, "work", [&] { done++; }));
  }
  link(s1.get(), s0.get(), e.get());
  link(s2.get(), s0.get(), e.get());
  ASSERT_NPU_OK(npurt::launch(s0.get(), "last", [&] { seen = done.load(); }));
  GraphHandle graph = endCapture(s0.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s0.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s0.get()));
  ASSERT_NPU_OK(npuSetTaskDelay(0));
  EXPECT_EQ(seen.load(), 9);
}

TEST_F(GraphForkTest, UnjoinedForkFailsTheCapture) {
  auto s0 = makeStream();
  auto s1 = makeStream();
  auto e = makeEvent();
  std::atomic<int> released{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  link(s0.get(), s1.get(), e.get());
  ASSERT_NPU_OK(npurt::launch(s1.get(), "dangling", [t = makeToken(released)] {}));
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureUnjoined, npuStreamEndCapture(s0.get(), &graph));
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(released.load(), 1);
  EXPECT_EQ(captureStatus(s0.get()), npuStreamCaptureStatusNone);
  EXPECT_EQ(captureStatus(s1.get()), npuStreamCaptureStatusNone);
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npurt::launch(s1.get(), "eager", [&] { ran = true; }));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  EXPECT_TRUE(ran.load());
}

TEST_F(GraphForkTest, WaitingOnIncompleteWorkOutsideTheCaptureBreaksIsolation) {
  auto s0 = makeStream();
  auto outside = makeStream();
  auto e = makeEvent();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(outside.get()));
  ASSERT_NPU_OK(npuEventRecord(e.get(), outside.get()));
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  EXPECT_NPU(npuErrorStreamCaptureIsolation, npuStreamWaitEvent(s0.get(), e.get(), 0));
  EXPECT_EQ(captureStatus(s0.get()), npuStreamCaptureStatusInvalidated);
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(s0.get(), &graph));
  gate.open();
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  // A completed event is nothing to wait for: fine inside a capture.
  ASSERT_NPU_OK(npuStreamBeginCapture(s0.get(), npuStreamCaptureModeGlobal));
  EXPECT_NPU_OK(npuStreamWaitEvent(s0.get(), e.get(), 0));
  GraphHandle ok = endCapture(s0.get());
}

TEST_F(GraphForkTest, TwoCapturesCannotWaitOnEachOther) {
  auto a = makeStream();
  auto b = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(npuStreamBeginCapture(a.get(), npuStreamCaptureModeRelaxed));
  ASSERT_NPU_OK(npuStreamBeginCapture(b.get(), npuStreamCaptureModeRelaxed));
  ASSERT_NPU_OK(npuEventRecord(e.get(), a.get()));
  EXPECT_NPU(npuErrorStreamCaptureIsolation, npuStreamWaitEvent(b.get(), e.get(), 0));
  EXPECT_EQ(captureStatus(a.get()), npuStreamCaptureStatusInvalidated);
  EXPECT_EQ(captureStatus(b.get()), npuStreamCaptureStatusInvalidated);
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(a.get(), &graph));
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(b.get(), &graph));
}

// --- Failures during a launch (Note [Task failure rule]) ---

TEST_F(GraphForkTest, AFailingNodeFailsTheLaunchStreamAndSkipsLaterNodes) {
  auto s = makeStream();
  std::atomic<int> before{0};
  std::atomic<int> after{0};
  std::atomic<int> attempts{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "before", [&] { before++; }));
  ASSERT_NPU_OK(npurt::launch(s.get(), "flaky", [&] {
    if (attempts++ == 0) throw std::runtime_error("boom");
  }));
  ASSERT_NPU_OK(npurt::launch(s.get(), "after", [&] { after++; }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  std::atomic<bool> behind{false};
  ASSERT_NPU_OK(npurt::launch(s.get(), "behind", [&] { behind = true; }));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'flaky' failed on stream"), std::string::npos) << message;
  EXPECT_NE(message.find("boom"), std::string::npos) << message;
  EXPECT_EQ(before.load(), 1);
  EXPECT_EQ(after.load(), 0);   // skipped
  EXPECT_FALSE(behind.load());  // discarded behind the failure
  // Reported once; the next launch runs every node.
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(before.load(), 2);
  EXPECT_EQ(after.load(), 1);
}

TEST_F(GraphForkTest, AnInjectedFaultInANodeFailsTheLaunch) {
  auto s = makeStream();
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i) ASSERT_NPU_OK(npurt::launch(s.get(), "node", [&] { ran++; }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultTask, 2));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("injected fault"), std::string::npos);
  EXPECT_EQ(ran.load(), 1);
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 4);
}

TEST_F(GraphForkTest, ALaunchBehindAFailureIsDiscarded) {
  auto s = makeStream();
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "node", [&] { ran++; }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npurt::launch(s.get(), "fails", [] { throw std::runtime_error("earlier"); }));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("earlier"), std::string::npos);
  EXPECT_EQ(ran.load(), 0);
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 1);
}

// --- Task groups and fused scopes ---

int addValue(void* userData, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  auto* cell = static_cast<std::atomic<int>*>(userData);
  cell->fetch_add(1);
  return 0;
}

TEST_F(GraphForkTest, TaskGroupUpdateReplacesTheGroupsTasks) {
  auto s = makeStream();
  std::atomic<int> oldA{0};
  std::atomic<int> oldB{0};
  std::atomic<int> newA{0};
  std::atomic<int> newB{0};
  std::atomic<int> other{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "outside", [&] { other++; }));
  ASSERT_NPU_OK(npuStreamBeginTaskGroup(s.get()));
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginTaskGroup(s.get()));
  const npuTask a{"a", &addValue, nullptr, &oldA, 0};
  const npuTask b{"b", &addValue, nullptr, &oldB, 0};
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &a));
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &b));
  npuTaskGroup_t group = 0;
  ASSERT_NPU_OK(npuStreamEndTaskGroup(s.get(), &group));
  EXPECT_NE(group, 0u);
  ASSERT_NPU_OK(npuStreamBeginTaskGroup(s.get()));
  ASSERT_NPU_OK(npuLaunchHostFunc(
      s.get(), [](void*) {}, nullptr));
  npuTaskGroup_t hostGroup = 0;
  ASSERT_NPU_OK(npuStreamEndTaskGroup(s.get(), &hostGroup));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  // Takes effect for launches issued after the update only.
  const npuTask updated[] = {{"a2", &addValue, nullptr, &newA, 0},
                             {"b2", &addValue, nullptr, &newB, 0}};
  ASSERT_NPU_OK(npuGraphExecUpdateTaskGroup(exec.get(), group, updated, 2));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(oldA.load(), 1);
  EXPECT_EQ(oldB.load(), 1);
  EXPECT_EQ(newA.load(), 1);
  EXPECT_EQ(newB.load(), 1);
  EXPECT_EQ(other.load(), 2);
  // Mismatches change nothing.
  EXPECT_NPU(npuErrorGraphExecUpdateFailure,
             npuGraphExecUpdateTaskGroup(exec.get(), group, updated, 1));
  EXPECT_NPU(npuErrorGraphExecUpdateFailure,
             npuGraphExecUpdateTaskGroup(exec.get(), hostGroup, updated, 1));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("host"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuGraphExecUpdateTaskGroup(exec.get(), 123456, updated, 2));
  EXPECT_NPU(npuErrorInvalidValue, npuGraphExecUpdateTaskGroup(exec.get(), group, nullptr, 2));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuGraphExecUpdateTaskGroup(nullptr, group, updated, 2));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(newA.load(), 2);
  EXPECT_EQ(oldA.load(), 1);
}

TEST_F(GraphForkTest, UpdatedTasksReleaseTheOldOnes) {
  auto s = makeStream();
  std::atomic<int> released{0};
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamBeginTaskGroup(s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "k", [t = makeToken(released), &ran] { ran++; }));
  npuTaskGroup_t group = 0;
  ASSERT_NPU_OK(npuStreamEndTaskGroup(s.get(), &group));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  graph.reset();
  const npuTask replacement{"k2", &addValue, nullptr, &ran, 0};
  ASSERT_NPU_OK(npuGraphExecUpdateTaskGroup(exec.get(), group, &replacement, 1));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 1);       // the replacement ran
  EXPECT_EQ(released.load(), 1);  // the old task went when the launch swapped it out
}

TEST_F(GraphForkTest, AFusedScopeIsOneNodeAndOneDeviceTask) {
  auto s = makeStream();
  auto e = makeEvent();
  RunLog log;
  std::vector<std::thread::id> threads(3);
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "first", [&log] { log.add("first"); }));
  ASSERT_NPU_OK(npuStreamBeginFusedScope(s.get(), "super_kernel"));
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginFusedScope(s.get(), "nested"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_NPU_OK(npurt::launch(s.get(), "part", [&, i] {
      threads[static_cast<size_t>(i)] = std::this_thread::get_id();
      log.add("part" + std::to_string(i));
    }));
  }
  ASSERT_NPU_OK(npuStreamEndFusedScope(s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "last", [&log] { log.add("last"); }));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 3u);
  const std::string path = tempPath(".dot");
  ASSERT_NPU_OK(npuGraphDebugDotPrint(graph.get(), path.c_str(), 0));
  const std::string dot = readFile(path);
  std::remove(path.c_str());
  EXPECT_NE(dot.find("super_kernel"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2"), std::string::npos) << dot;
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"first", "part0", "part1", "part2", "last"}));
  EXPECT_EQ(threads[0], threads[1]);  // one task: one thread, back to back
  EXPECT_EQ(threads[1], threads[2]);
  // Waiting inside a scope would break the chain: refused.
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  ASSERT_NPU_OK(npuStreamBeginFusedScope(s.get(), nullptr));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuStreamWaitEvent(s.get(), e.get(), 0));
  npuGraph_t invalid = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(s.get(), &invalid));
}

}  // namespace
}  // namespace npurt_test
