// Covers conditional nodes (npuStreamBeginCaptureToIf / EndCaptureToIf):
// the body runs at a launch only when the condition byte, set by the work
// captured before the node, is non-zero; bodies nest; a failing body node
// fails the launch with its name; a body is a capture of its own whose
// errors invalidate the whole tree; misuse is refused with the capture
// going on where it can. See Note [Conditional nodes] in csrc/npurt/README.md.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_graph_util.h"

namespace npurt_test {
namespace {

// A byte of device memory, freed at the end of the test.
class DeviceByte {
 public:
  DeviceByte() { EXPECT_NPU_OK(npuMalloc(&ptr_, 1)); }
  ~DeviceByte() { EXPECT_NPU_OK(npuFree(ptr_)); }
  DeviceByte(const DeviceByte&) = delete;
  DeviceByte& operator=(const DeviceByte&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

class GraphConditionalTest : public NpurtTest {
 protected:
  // Captures on `s` the task "set" writing `*flag` into `cond` (the work
  // before the node sets the condition, as a kernel would), then an if node
  // whose body, captured on `body`, logs "body".
  void captureSetAndIf(npuStream_t s, npuStream_t body, unsigned char* cond,
                       const std::atomic<unsigned char>* flag) {
    ASSERT_NPU_OK(npurt::launch(s, "set", [cond, flag] { *cond = flag->load(); }));
    ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s, cond, body));
    ASSERT_NPU_OK(npurt::launch(body, "body", [this] { log.add("body"); }));
    ASSERT_NPU_OK(npuStreamEndCaptureToIf(body));
  }

  std::vector<std::string> launchOnce(npuGraphExec_t exec, npuStream_t s) {
    log.clear();
    EXPECT_NPU_OK(npuGraphLaunch(exec, s));
    EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(s, kHangTimeoutUs));
    return log.entries();
  }

  RunLog log;
};

using Log = std::vector<std::string>;

TEST_F(GraphConditionalTest, TheBodyRunsOnlyWhenTheConditionSetBeforeTheNodeIsNonZero) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  std::atomic<unsigned char> flag{1};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "before", [&] { log.add("before"); }));
  captureSetAndIf(s.get(), body.get(), cond.get(), &flag);
  ASSERT_NPU_OK(npurt::launch(s.get(), "after", [&] { log.add("after"); }));
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 4u) << "before, set, if, after: the body is inside the if";
  EXPECT_EQ(log.entries(), Log{}) << "nothing runs at capture";
  GraphExecHandle exec = instantiate(graph.get());
  EXPECT_EQ(launchOnce(exec.get(), s.get()), (Log{"before", "body", "after"}));
  flag = 0;
  EXPECT_EQ(launchOnce(exec.get(), s.get()), (Log{"before", "after"}));
  flag = 7;  // any non-zero byte is true
  EXPECT_EQ(launchOnce(exec.get(), s.get()), (Log{"before", "body", "after"}));
}

TEST_F(GraphConditionalTest, BodiesNestAndEachReadsItsOwnCondition) {
  auto s = makeStream();
  auto outerBody = makeStream();
  auto innerBody = makeStream();
  DeviceByte outer;
  DeviceByte inner;
  std::atomic<unsigned char> outerFlag{0};
  std::atomic<unsigned char> innerFlag{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeThreadLocal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "set", [&] {
    *outer.get() = outerFlag.load();
    *inner.get() = innerFlag.load();
  }));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), outer.get(), outerBody.get()));
  ASSERT_NPU_OK(npurt::launch(outerBody.get(), "outer", [&] { log.add("outer"); }));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(outerBody.get(), inner.get(), innerBody.get()));
  ASSERT_NPU_OK(npurt::launch(innerBody.get(), "inner", [&] { log.add("inner"); }));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(innerBody.get()));
  ASSERT_NPU_OK(npurt::launch(outerBody.get(), "outer end", [&] { log.add("outer end"); }));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(outerBody.get()));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  EXPECT_EQ(launchOnce(exec.get(), s.get()), Log{});
  innerFlag = 1;
  EXPECT_EQ(launchOnce(exec.get(), s.get()), Log{}) << "the inner if is inside the outer body";
  outerFlag = 1;
  EXPECT_EQ(launchOnce(exec.get(), s.get()), (Log{"outer", "inner", "outer end"}));
  innerFlag = 0;
  EXPECT_EQ(launchOnce(exec.get(), s.get()), (Log{"outer", "outer end"}));
}

TEST_F(GraphConditionalTest, AFailingBodyNodeFailsTheLaunchWithItsNameAndSkipsTheRest) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  std::atomic<int> attempts{0};
  std::atomic<bool> rest{false};
  std::atomic<bool> after{false};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "set", [&] { *cond.get() = 1; }));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  ASSERT_NPU_OK(npurt::launch(body.get(), "flaky", [&] {
    if (attempts++ == 0) throw std::runtime_error("boom");
  }));
  ASSERT_NPU_OK(npurt::launch(body.get(), "rest", [&] { rest = true; }));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(body.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "after", [&] { after = true; }));
  GraphHandle graph = endCapture(s.get());
  GraphExecHandle exec = instantiate(graph.get());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("if"), std::string::npos) << message;
  EXPECT_NE(message.find("flaky: "), std::string::npos) << message;
  EXPECT_NE(message.find("boom"), std::string::npos) << message;
  EXPECT_FALSE(rest.load());
  EXPECT_FALSE(after.load());
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));  // the next launch is whole again
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  EXPECT_TRUE(rest.load());
  EXPECT_TRUE(after.load());
}

TEST_F(GraphConditionalTest, ABodyIsACaptureOfItsOwnUntilItEnds) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  uint64_t rootId = 0;
  uint64_t bodyId = 0;
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(s.get(), &status, &rootId));
  ASSERT_NPU_OK(npuStreamGetCaptureInfo(body.get(), &status, &bodyId));
  EXPECT_EQ(status, npuStreamCaptureStatusActive);
  EXPECT_NE(bodyId, 0u);
  EXPECT_NE(bodyId, rootId);
  // The root cannot end while its body is open; both go on.
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndCapture(s.get(), &graph));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("npuStreamEndCaptureToIf"),
            std::string::npos);
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  // Each end function refuses the other kind of capture.
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndCapture(body.get(), &graph));
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndCaptureToIf(s.get()));
  EXPECT_EQ(captureStatus(body.get()), npuStreamCaptureStatusActive);
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(body.get()));
  EXPECT_EQ(captureStatus(body.get()), npuStreamCaptureStatusNone);
  GraphHandle ended = endCapture(s.get());
  EXPECT_EQ(nodeCount(ended.get()), 1u);
}

TEST_F(GraphConditionalTest, AnErrorInABodyInvalidatesTheWholeTreeAndReleasesItsTasks) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  std::atomic<int> released{0};
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "root", [t = makeToken(released), &ran] { ran = true; }));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  ASSERT_NPU_OK(
      npurt::launch(body.get(), "in body", [t = makeToken(released), &ran] { ran = true; }));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuStreamSynchronize(body.get()));
  EXPECT_EQ(released.load(), 2) << "both captures let go of their tasks";
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusInvalidated);
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCaptureToIf(body.get()));
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(s.get(), &graph));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("npuStreamSynchronize"), std::string::npos)
      << "the root names the body's error";
  EXPECT_EQ(graph, nullptr);
  EXPECT_FALSE(ran.load());
  // Both streams work eagerly again.
  ASSERT_NPU_OK(npurt::launch(body.get(), "eager", [&] { ran = true; }));
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(body.get(), kHangTimeoutUs));
  EXPECT_TRUE(ran.load());
}

TEST_F(GraphConditionalTest, AnErrorInTheRootInvalidatesAnOpenBody) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  EXPECT_NPU(npuErrorStreamCaptureUnsupported, npuStreamQuery(s.get()));
  EXPECT_EQ(captureStatus(body.get()), npuStreamCaptureStatusInvalidated);
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npurt::launch(body.get(), "late", [] {}));
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCaptureToIf(body.get()));
  npuGraph_t graph = nullptr;
  EXPECT_NPU(npuErrorStreamCaptureInvalidated, npuStreamEndCapture(s.get(), &graph));
}

TEST_F(GraphConditionalTest, MisuseIsRefusedAndTheCaptureGoesOn) {
  auto s = makeStream();
  auto body = makeStream();
  auto other = makeStream();
  DeviceByte cond;
  unsigned char host = 1;
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()))
      << "s does not capture";
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamBeginCapture(other.get(), npuStreamCaptureModeRelaxed));
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginCaptureToIf(s.get(), cond.get(), other.get()))
      << "the body stream captures";
  EXPECT_NPU(npuErrorIllegalState, npuStreamBeginCaptureToIf(s.get(), cond.get(), s.get()));
  EXPECT_NPU(npuErrorInvalidValue, npuStreamBeginCaptureToIf(s.get(), nullptr, body.get()));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuStreamBeginCaptureToIf(s.get(), &host, body.get()));
  EXPECT_NPU(npuErrorIllegalState, npuStreamEndCaptureToIf(body.get())) << "no body begun";
  ASSERT_NPU_OK(npuStreamBeginTaskGroup(s.get()));
  EXPECT_NPU(npuErrorNotSupported, npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  npuTaskGroup_t group = 0;
  ASSERT_NPU_OK(npuStreamEndTaskGroup(s.get(), &group));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  EXPECT_NPU(npuErrorNotSupported, npuStreamBeginTaskGroup(body.get()));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(body.get()));
  EXPECT_EQ(captureStatus(s.get()), npuStreamCaptureStatusActive);
  GraphHandle graph = endCapture(s.get());
  EXPECT_EQ(nodeCount(graph.get()), 1u);
  GraphHandle otherGraph = endCapture(other.get());
}

TEST_F(GraphConditionalTest, BodyTasksAreReleasedWithTheGraphAndItsExecs) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  std::atomic<int> released{0};
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  ASSERT_NPU_OK(npurt::launch(body.get(), "held", [t = makeToken(released)] {}));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(body.get()));
  {
    GraphHandle graph = endCapture(s.get());
    GraphExecHandle exec = instantiate(graph.get());
    ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
    ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
    EXPECT_EQ(released.load(), 0);
  }
  EXPECT_EQ(released.load(), 1);
}

TEST_F(GraphConditionalTest, TheDotDumpDrawsTheBodyAsAClusterOfTheIfNode) {
  auto s = makeStream();
  auto body = makeStream();
  DeviceByte cond;
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(npurt::launch(s.get(), "set", [] {}));
  ASSERT_NPU_OK(npuStreamBeginCaptureToIf(s.get(), cond.get(), body.get()));
  ASSERT_NPU_OK(npurt::launch(body.get(), "then_kernel", [] {}));
  ASSERT_NPU_OK(npuStreamEndCaptureToIf(body.get()));
  GraphHandle graph = endCapture(s.get());
  const std::string path = tempPath(".dot");
  ASSERT_NPU_OK(npuGraphDebugDotPrint(graph.get(), path.c_str(), 0));
  const std::string text = readFile(path);
  std::remove(path.c_str());
  EXPECT_NE(text.find("n1 [label=\"1 if"), std::string::npos) << text;
  EXPECT_NE(text.find("subgraph cluster_n1"), std::string::npos) << text;
  EXPECT_NE(text.find("n1_0 [label=\"0 task\\nthen_kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("n1 -> n1_0 [style=dashed]"), std::string::npos) << text;
  EXPECT_NE(text.find("n0 -> n1;"), std::string::npos) << text;
}

}  // namespace
}  // namespace npurt_test
