// Covers what a capture refuses and how: operations that cannot be captured
// (synchronize or query of a capturing stream, a graph launch on it, a task
// that cannot be replayed) fail at once with npuErrorStreamCaptureUnsupported
// and invalidate the capture, which then records nothing and fails at its
// end, releasing its tasks; the capture modes (global, thread-local,
// relaxed) and the unsafe calls they forbid; begin/end misuse; events
// recorded in a capture. After each failure the process and the stream stay
// usable. See Note [Stream capture] in csrc/npurt/README.md.
#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "test_graph_util.h"
#include "npurt/npurt_stream_idle.h"

namespace npurt_test {
namespace {

class GraphCaptureTest : public NpurtTest {};

// After an invalidation: further work is refused, the end fails and the
// stream works eagerly again.
void expectInvalidatedAndRecover(npuStream_t s) {
  EXPECT_EQ(captureStatus(s), npuStreamCaptureStatusInvalidated);
  std::atomic<bool> ran{false};
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npurt::launch(s, "late", [&] { ran = true; }));
  npuGraph_t graph = reinterpret_cast<npuGraph_t>(uintptr_t{1});
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(s, &graph));
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(captureStatus(s), npuStreamCaptureStatusNone);
  ASSERT_NPU_OK(npurt::launch(s, "eager", [&] { ran = true; }));
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s, kHangTimeoutUs));
  EXPECT_TRUE(ran.load());
}

TEST_F(GraphCaptureTest, SynchronizeOfACapturingStreamFailsAndInvalidates) {
  auto s = makeStream();
  std::atomic<int> released{0};
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  ASSERT_NPU_OK(
      npurt::launch(s.get(), "captured", [t = makeToken(released), &ran] { ran = true; }));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuStreamSynchronize(s.get()));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("capturing"), std::string::npos);
  EXPECT_EQ(released.load(), 1);  // the invalidated capture let go of its task
  expectInvalidatedAndRecover(s.get());
  EXPECT_FALSE(ran.load());  // no half graph ran
}

TEST_F(GraphCaptureTest, ACapturingStreamIsNotIdleAndIsIdleLeavesTheCaptureIntact) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  int idle = -1;
  ASSERT_NPU_OK(npuStreamIsIdle(s.get(), &idle));
  EXPECT_EQ(idle, 0) << "its work is recorded, not run";
  npuGraph_t graph = nullptr;
  ASSERT_NPU_OK(npuStreamEndCapture(s.get(), &graph)) << "the capture was not invalidated";
  ASSERT_NPU_OK(npuGraphDestroy(graph));
  ASSERT_NPU_OK(npuStreamIsIdle(s.get(), &idle));
  EXPECT_EQ(idle, 1);
}

TEST_F(GraphCaptureTest, QueryAndTimedSynchronizeOfACapturingStreamFail) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuStreamQuery(s.get()));
  expectInvalidatedAndRecover(s.get());
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported,
             npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  expectInvalidatedAndRecover(s.get());
}

TEST_F(GraphCaptureTest, GraphLaunchOnACapturingStreamFails) {
  auto s = makeStream();
  auto other = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(other.get(), npuStreamCaptureModeGlobal));
  GraphHandle graph = endCapture(other.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuGraphLaunch(exec.get(), s.get()));
  expectInvalidatedAndRecover(s.get());
}

int noRun(void*, char*, size_t) { return 0; }

TEST_F(GraphCaptureTest, NotReplayableTasksCannotBeCaptured) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  const npuTask task{"once", &noRun, nullptr, nullptr, npuTaskNotReplayable};
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuLaunchTask(s.get(), &task));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("'once'"), std::string::npos);
  expectInvalidatedAndRecover(s.get());
  // Eagerly the flag means nothing.
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &task));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(GraphCaptureTest, GlobalCaptureForbidsUnsafeCallsOnEveryThread) {
  auto s = makeStream();
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 16));
  char host[16] = {};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  // npuMalloc / npuFree never synchronize: allowed (Note [Stream capture]).
  void* more = nullptr;
  ASSERT_NPU_OK(npuMalloc(&more, 16));
  ASSERT_NPU_OK(npuFree(more));
  auto other = std::async(std::launch::async,
                          [&] { return npuMemcpy(host, buf, sizeof host, npuMemcpyDeviceToHost); });
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, other.get());
  expectInvalidatedAndRecover(s.get());
  // Nothing captures any more: the same call works.
  EXPECT_NPU_OK(npuMemcpy(host, buf, sizeof host, npuMemcpyDeviceToHost));
  EXPECT_NPU_OK(npuFree(buf));
}

TEST_F(GraphCaptureTest, DeviceSynchronizeDuringAGlobalCaptureFailsPromptly) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "captured", [] {}));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuDeviceSynchronize());
  expectInvalidatedAndRecover(s.get());
  EXPECT_NPU_OK(npuDeviceSynchronize());
}

TEST_F(GraphCaptureTest, ThreadLocalCaptureForbidsUnsafeCallsOnItsOwnThreadOnly) {
  auto s = makeStream();
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 16));
  char host[16] = {};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeThreadLocal));
  auto other = std::async(std::launch::async, [&] { return npuMemset(buf, 3, sizeof host); });
  EXPECT_NPU_OK(other.get());
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuMemcpy(host, buf, 16, npuMemcpyDeviceToHost));
  expectInvalidatedAndRecover(s.get());
  EXPECT_NPU_OK(npuFree(buf));
}

TEST_F(GraphCaptureTest, RelaxedCaptureAllowsUnsafeCalls) {
  auto s = makeStream();
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 16));
  char host[16] = {};
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  ASSERT_NPU_OK(npurt::launch(s.get(), "captured", [&] { ran = true; }));
  EXPECT_NPU_OK(npuMemcpy(host, buf, sizeof host, npuMemcpyDeviceToHost));
  EXPECT_NPU_OK(npuMemset(buf, 0, sizeof host));
  EXPECT_NPU_OK(npuDeviceSynchronize());  // captured work is not enqueued: no wait
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 1u);
  EXPECT_FALSE(ran.load());
  EXPECT_NPU_OK(npuFree(buf));
}

TEST_F(GraphCaptureTest, OnlyTheBeginningThreadEndsAGlobalCapture) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  auto other = std::async(std::launch::async, [&] {
    npuGraph_t graph = nullptr;
    return npuStreamEndCapture(s.get(), &graph);
  });
  EXPECT_NPU(npuErrorStreamCaptureWrongThread, other.get());
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);  // goes on
  GraphHandle graph = endCapture(s.get());
  // A relaxed capture may end anywhere.
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  auto relaxed = std::async(std::launch::async, [&] {
    npuGraph_t g = nullptr;
    const npuError_t status = npuStreamEndCapture(s.get(), &g);
    if (g != nullptr) (void)npuGraphDestroy(g);
    return status;
  });
  EXPECT_NPU_OK(relaxed.get());
}

TEST_F(GraphCaptureTest, BeginAndEndMisuseIsIllegalState) {
  auto s = makeStream();
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndCapture(s.get(), &graph));
  EXPECT_NPU(npuErrorInvalidValue,
             npuStreamBeginCapture(s.get(), static_cast<npuStreamCaptureMode>(7)));
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  EXPECT_NPU(npuErrorInvalidValue, npuStreamEndCapture(s.get(), nullptr));
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  GraphHandle done = endCapture(s.get());
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginTaskGroup(s.get()));
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndFusedScope(s.get()));
}

TEST_F(GraphCaptureTest, EventsRecordedInACaptureHaveNoVersion) {
  auto s = makeStream();
  auto other = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeRelaxed));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  EXPECT_NPU(npuErrorCapturedEvent, npuEventQuery(e.get()));
  EXPECT_NPU(npuErrorCapturedEvent, npuEventSynchronize(e.get()));
  float ms = 0;
  EXPECT_NPU(npuErrorCapturedEvent, npuEventElapsedTime(&ms, e.get(), e.get()));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 0u);  // a record is an edge, not a node
  // Its capture is over: nobody can join it through the event.
  EXPECT_NPU(npuErrorCapturedEvent, npuStreamWaitEvent(other.get(), e.get(), 0));
  EXPECT_EQ(captureStatus(other.get()), npuStreamCaptureStatusNone);
  // Recording it outside a capture makes it an ordinary event again.
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  EXPECT_NPU_OK(npuStreamWaitEvent(other.get(), e.get(), 0));
}

TEST_F(GraphCaptureTest, DestroyingACapturingStreamEndsItsCapture) {
  auto s = makeStream();
  std::atomic<int> released{0};
  npuStream_t raw = s.get();
  ASSERT_NPU_OK(npuStreamBeginCapture(raw, npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(raw, "captured", [t = makeToken(released)] {}));
  s.reset();
  EXPECT_EQ(released.load(), 1);
  // No capture is left to forbid anything.
  EXPECT_NPU_OK(npuDeviceSynchronize());
}

TEST_F(GraphCaptureTest, CapturedCopiesCheckTheirRangesAtCapture) {
  auto s = makeStream();
  void* buf = nullptr;
  ASSERT_NPU_OK(npuMalloc(&buf, 16));
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  char host[32] = {};
  EXPECT_NPU(npuErrorInvalidDevicePointer,
             npuMemcpyAsync(host, buf, 32, npuMemcpyDeviceToHost, s.get()));
  // An argument error does not invalidate the capture.
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  ASSERT_NPU_OK(npuMemcpyAsync(host, buf, 16, npuMemcpyDeviceToHost, s.get()));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 1u);
  // The graph holds the allocation: freeing it does not free the memory
  // under the graph's copy (Note [Memory lifetime]).
  EXPECT_NPU_OK(npuFree(buf));
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

}  // namespace
}  // namespace npurt_test
