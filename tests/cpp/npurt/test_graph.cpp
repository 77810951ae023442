// Covers graph capture and launch on one stream: capture records work
// without running it, launches run it (repeatedly, seeing the memory as it
// is at each launch), host functions replay, later work and events on the
// launch stream wait for the whole graph, captured tasks are released when
// the graph and its execs are gone, the DOT dump, and bad handles. See
// Note [Stream capture] and Note [Graph launch] in csrc/npurt/README.md.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "test_graph_util.h"

namespace npurt_test {
namespace {

class GraphTest : public NpurtTest {};

void countHostFn(void* userData) { static_cast<std::atomic<int>*>(userData)->fetch_add(1); }

TEST_F(GraphTest, CaptureRecordsWorkWithoutRunningIt) {
  auto s = makeStream();
  std::atomic<int> ran{0};
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 64));
  ASSERT_NPU_OK(npuMemset(buf, 0, 64));
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusNone);
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  ASSERT_NPU_OK(npurt::launch(s.get(), "count", [&] { ran++; }));
  ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &countHostFn, &ran));
  ASSERT_NPU_OK(npuMemsetAsync(buf, 7, 64, s.get()));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusNone);
  EXPECT_EQ(nodeCount(graph.get()), 3u);
  // Nothing was enqueued: the stream is idle and nothing ran.
  EXPECT_NPU_OK(npuStreamQuery(s.get()));
  EXPECT_EQ(ran.load(), 0);
  unsigned char host[64];
  ASSERT_NPU_OK(npuMemcpy(host, buf, 64, npuMemcpyDeviceToHost));
  EXPECT_EQ(host[0], 0);
  // The stream works eagerly again.
  ASSERT_NPU_OK(npurt::launch(s.get(), "eager", [&] { ran += 100; }));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 100);
  EXPECT_NPU_OK(npuFree(buf));
}

TEST_F(GraphTest, EveryLaunchRunsTheGraphAgain) {
  auto s = makeStream();
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "a", [&] { ran += 1; }));
  ASSERT_NPU_OK(npurt::launch(s.get(), "b", [&] { ran += 10; }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  for (int i = 1; i <= 5; ++i) {
    ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
    ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    EXPECT_EQ(ran.load(), 11 * i);
  }
  // Launches queued back to back run in full too.
  for (int i = 0; i < 20; ++i) ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 11 * 25);
}

TEST_F(GraphTest, ReplaysSeeTheCurrentContentsOfTheirInputs) {
  auto s = makeStream();
  constexpr size_t kCount = 256;
  void* in = nullptr;
  void* out = nullptr;
  ASSERT_NPU_OK(npuMalloc(&in, kCount));
  ASSERT_NPU_OK(npuMalloc(&out, kCount));
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuMemcpyAsync(out, in, kCount, npuMemcpyDeviceToDevice, s.get()));
  // Device memory is host memory: a task may compute on it in place.
  ASSERT_NPU_OK(npurt::launch(s.get(), "add_one", [out] {
    auto* bytes = static_cast<unsigned char*>(out);
    for (size_t i = 0; i < kCount; ++i) bytes[i] = static_cast<unsigned char>(bytes[i] + 1);
  }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  for (int round = 0; round < 4; ++round) {
    std::vector<unsigned char> input(kCount, static_cast<unsigned char>(10 * round));
    ASSERT_NPU_OK(npuMemcpy(in, input.data(), kCount, npuMemcpyHostToDevice));
    ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
    ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    std::vector<unsigned char> output(kCount);
    ASSERT_NPU_OK(npuMemcpy(output.data(), out, kCount, npuMemcpyDeviceToHost));
    EXPECT_EQ(output,
              std::vector<unsigned char>(kCount, static_cast<unsigned char>(10 * round + 1)))
        << "round " << round;
  }
  EXPECT_NPU_OK(npuFree(in));
  EXPECT_NPU_OK(npuFree(out));
}

TEST_F(GraphTest, HostFunctionsRunAtEveryReplay) {
  auto s = makeStream();
  std::atomic<int> calls{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeThreadLocal));
  ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &countHostFn, &calls));
  ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &countHostFn, &calls));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  for (int i = 0; i < 3; ++i) ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(calls.load(), 6);
}

TEST_F(GraphTest, LaterWorkAndEventsWaitForTheWholeGraph) {
  auto s = makeStream();
  auto e = makeEvent();
  ScopedGate gate;
  auto started = std::make_shared<Gate>();
  RunLog log;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "blocked", [g = gate.get(), started, &log] {
    started->open();
    g->wait();
    log.add("graph");
  }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "after", [&log] { log.add("after"); }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  ASSERT_TRUE(started->waitFor(kHangTimeout));
  // The node is running: neither the later task nor the event may complete.
  EXPECT_NPU(npuErrorNotReady, npuEventQuery(e.get()));
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(s.get()));
  EXPECT_TRUE(log.entries().empty());
  gate.open();
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"graph", "after"}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(GraphTest, GraphStartsAfterEarlierWorkOfTheLaunchStream) {
  auto s = makeStream();
  RunLog log;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "node", [&log] { log.add("graph"); }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 20'000));  // a slow predecessor
  ASSERT_NPU_OK(npurt::launch(s.get(), "before", [&log] { log.add("before"); }));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"before", "graph"}));
}

TEST_F(GraphTest, CapturedTasksAreReleasedWhenGraphAndExecsAreGone) {
  auto s = makeStream();
  std::atomic<int> released{0};
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i) {
    ASSERT_NPU_OK(npurt::launch(s.get(), "holds", [t = makeToken(released), &ran] { ran++; }));
  }
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(released.load(), 0);
  GraphExecHandle exec = instantiate(graph.get());
  graph.reset();  // the exec still holds the tasks
  EXPECT_EQ(released.load(), 0);
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 6);
  EXPECT_EQ(released.load(), 0);  // replaying consumed nothing
  exec.reset();
  EXPECT_EQ(released.load(), 3);
}

TEST_F(GraphTest, GraphDestroyWithoutExecReleasesAtOnce) {
  auto s = makeStream();
  std::atomic<int> released{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "holds", [t = makeToken(released)] {}));
  GraphHandle graph = endCapture(s.get());
  graph.reset();
  EXPECT_EQ(released.load(), 1);
}

TEST_F(GraphTest, ExecDestroyedDuringLaunchReleasesAfterTheLaunch) {
  auto s = makeStream();
  std::atomic<int> released{0};
  std::atomic<bool> ran{false};
  ScopedGate gate;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "blocked", [g = gate.get(), t = makeToken(released), &ran] {
    g->wait();
    ran = true;
  }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  graph.reset();
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  exec.reset();  // the launch in flight keeps what it needs
  EXPECT_EQ(released.load(), 0);
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_TRUE(ran.load());
  // The launch's last reference goes with its join, before synchronize
  // can see the stream's work finished.
  EXPECT_EQ(released.load(), 1);
}

TEST_F(GraphTest, EmptyCaptureGivesAnEmptyGraphThatLaunches) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 0u);
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(GraphTest, DotPrintShowsNodesAndDependencies) {
  auto s = makeStream();
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 32));
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "my_kernel", [] {}));
  ASSERT_NPU_OK(npuMemsetAsync(buf, 1, 32, s.get()));
  GraphHandle graph = endCapture(s.get());
  const std::string path = tempPath(".dot");
  ASSERT_NPU_OK(npuGraphDebugDotPrint(graph.get(), path.c_str(), 0));
  const std::string text = readFile(path);
  std::remove(path.c_str());
  EXPECT_NE(text.find("digraph"), std::string::npos) << text;
  EXPECT_NE(text.find("my_kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("memset"), std::string::npos) << text;
  EXPECT_NE(text.find("n0 -> n1"), std::string::npos) << text;
  EXPECT_NPU(npuErrorInvalidValue, npuGraphDebugDotPrint(graph.get(), nullptr, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuGraphDebugDotPrint(graph.get(), path.c_str(), 1));
  EXPECT_NPU(npuErrorInvalidValue,
             npuGraphDebugDotPrint(graph.get(), "/nonexistent-dir/graph.dot", 0));
  EXPECT_NPU_OK(npuFree(buf));
}

TEST_F(GraphTest, BadHandlesAreRejected) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  npuGraphExec_t exec2 = nullptr;
  size_t count = 0;
  const auto garbageGraph = reinterpret_cast<npuGraph_t>(uintptr_t{0xdeadbeef});
  const auto garbageExec = reinterpret_cast<npuGraphExec_t>(uintptr_t{0xdeadbeef});
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphInstantiate(&exec2, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphInstantiate(&exec2, garbageGraph, 0));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphGetNodeCount(garbageGraph, &count));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphLaunch(garbageExec, s.get()));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphLaunch(nullptr, s.get()));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphLaunch(exec.get(), nullptr));
  // A graph handle is not an exec handle and the other way round.
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuGraphLaunch(reinterpret_cast<npuGraphExec_t>(graph.get()), s.get()));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuGraphDestroy(reinterpret_cast<npuGraph_t>(exec.get())));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuGraphGetNodeCount(reinterpret_cast<npuGraph_t>(s.get()), &count));
  EXPECT_NPU(npuErrorInvalidValue, npuGraphInstantiate(&exec2, graph.get(), 1));
  EXPECT_NPU(npuErrorInvalidValue, npuGraphInstantiate(nullptr, graph.get(), 0));
  // Destroyed handles stay invalid.
  npuGraph_t raw = nullptr;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamEndCapture(s.get(), &raw));
  ASSERT_NPU_OK(npuGraphDestroy(raw));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphDestroy(raw));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphInstantiate(&exec2, raw, 0));
  npuGraphExec_t rawExec = exec.get();
  exec.reset();
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphLaunch(rawExec, s.get()));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuGraphExecDestroy(rawExec));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuStreamBeginCapture(nullptr, npuStreamCaptureModeGlobal));
  npuStreamCaptureStatus status{};
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuStreamIsCapturing(nullptr, &status));
  EXPECT_NPU(npuErrorInvalidValue, npuStreamIsCapturing(s.get(), nullptr));
}

TEST_F(GraphTest, CaptureInfoNamesTheCapture) {
  auto s = makeStream();
  npuStreamCaptureStatus status{};
  uint64_t id = 99;
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s.get(), &status, &id));
  EXPECT_EQ(status, npuStreamCaptureStatusNone);
  EXPECT_EQ(id, 0u);
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s.get(), &status, &id));
  EXPECT_EQ(status, npuStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  GraphHandle graph = endCapture(s.get());
  uint64_t next = 0;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s.get(), &status, &next));
  EXPECT_GT(next, id);  // ids are never reused
  GraphHandle second = endCapture(s.get());
}

}  // namespace
}  // namespace npurt_test
