// Covers Note [Task failure rule] (csrc/npurt/README.md): the failure message
// names the task, stream and device; tasks reaching the head while the
// failure is unreported are discarded with their release called; event
// records and waits still complete so nobody waiting on the stream hangs; the
// failure is reported exactly once by query, synchronize(-with-timeout) or
// device synchronize and then cleared; work after the report runs; other
// streams are unaffected. npuStreamPeekAtLastError sees a held failure
// without reporting it, also from a discarded task's release.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "npurt/npurt_stream_idle.h"

namespace npurt_test {
namespace {

// A C task whose run/release calls are counted.
struct Probe {
  std::atomic<int> runs{0};
  std::atomic<int> releases{0};
  const char* error = nullptr;  // non-NULL: run fails with this message
};

int probeRun(void* user, char* buf, size_t size) {
  auto* p = static_cast<Probe*>(user);
  p->runs++;
  if (p->error == nullptr) return 0;
  std::snprintf(buf, size, "%s", p->error);
  return 1;
}
void probeRelease(void* user) { static_cast<Probe*>(user)->releases++; }

npuError_t launchProbe(npuStream_t s, const char* name, Probe* p, unsigned flags = 0) {
  npuTask task{name, &probeRun, &probeRelease, p, flags};
  return npuLaunchTask(s, &task);
}

class FailureTest : public NpurtTest {
 protected:
  uint64_t streamId(npuStream_t s) {
    uint64_t id = 0;
    EXPECT_NPU_OK(npuStreamGetId(s, &id));
    return id;
  }
  // Records an event after everything queued on `s` and waits for it; records
  // complete even on a failed stream, so this never reports the failure.
  void drainWithoutReporting(npuStream_t s) {
    auto e = makeEvent();
    ASSERT_NPU_OK(npuEventRecord(e.get(), s));
    ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  }
};

TEST_F(FailureTest, MessageNamesTaskStreamDeviceAndCause) {
  auto s = makeStream(1);
  Probe failing;
  failing.error = "the cause";
  ASSERT_NPU_OK(launchProbe(s.get(), "my_op", &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  const std::string expected = "task 'my_op' failed on stream " +
                               std::to_string(streamId(s.get())) + " (device 1): the cause";
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find(expected), std::string::npos) << message;
  EXPECT_EQ(failing.runs.load(), 1);
  EXPECT_EQ(failing.releases.load(), 1);
}

TEST_F(FailureTest, NullNameIsReportedAsTask) {
  auto s = makeStream();
  Probe failing;
  failing.error = "anonymous";
  ASSERT_NPU_OK(launchProbe(s.get(), nullptr, &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'task' failed"), std::string::npos) << message;
}

TEST_F(FailureTest, CopyNameFlagKeepsATemporaryName) {
  auto s = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  Probe failing;
  failing.error = "x";
  {
    std::string name = "dynamic_name_";
    name += std::to_string(12345);
    ASSERT_NPU_OK(launchProbe(s.get(), name.c_str(), &failing, npuTaskCopyName));
    std::memset(name.data(), 'Z', name.size());  // the runtime must hold its own copy
  }
  gate.open();
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'dynamic_name_12345' failed"), std::string::npos) << message;
}

TEST_F(FailureTest, LaterQueuedTasksAreDiscardedAndReleased) {
  auto s = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  Probe failing, later[3];
  failing.error = "first failure";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  for (auto& p : later) ASSERT_NPU_OK(launchProbe(s.get(), "discarded", &p));
  std::atomic<int> hostFnRuns{0};
  ASSERT_NPU_OK(npuLaunchHostFunc(
      s.get(), [](void* u) { (*static_cast<std::atomic<int>*>(u))++; }, &hostFnRuns));
  auto destroyed = std::make_shared<int>(0);
  ASSERT_NPU_OK(npurt::launch(s.get(), "discarded_callable", [keep = destroyed] { (*keep)++; }));
  gate.open();
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  for (auto& p : later) {
    EXPECT_EQ(p.runs.load(), 0);
    EXPECT_EQ(p.releases.load(), 1);
  }
  EXPECT_EQ(hostFnRuns.load(), 0);
  EXPECT_EQ(*destroyed, 0);
  EXPECT_EQ(destroyed.use_count(), 1) << "the discarded callable was released";
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("first failure"), std::string::npos) << message;
}

TEST_F(FailureTest, DiscardedCopiesAndMemsetsDoNotTouchMemory) {
  auto s = makeStream();
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 256));
  ASSERT_NPU_OK(npuMemset(d, 0x11, 256));
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "fails", [] { throw std::runtime_error("no"); }));
  std::vector<unsigned char> host(256, 0xEE);
  ASSERT_NPU_OK(npuMemsetAsync(d, 0x22, 256, s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d, 256, npuMemcpyDeviceToHost, s.get()));
  gate.open();
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_EQ(host, std::vector<unsigned char>(256, 0xEE));
  std::vector<unsigned char> check(256, 0);
  ASSERT_NPU_OK(npuMemcpy(check.data(), d, 256, npuMemcpyDeviceToHost));
  EXPECT_EQ(check, std::vector<unsigned char>(256, 0x11));
  ASSERT_NPU_OK(npuFree(d));
}

TEST_F(FailureTest, EventRecordsAndWaitsStillCompleteSoWaitersDoNotHang) {
  auto failed = makeStream(0);
  auto other = makeStream(0);
  auto waiter = makeStream(1);
  auto fromOther = makeEvent();
  auto afterFailure = makeEvent();
  ScopedGate gateFailed, gateOther;
  ASSERT_NPU_OK(gateOther.launchBlocker(other.get()));
  ASSERT_NPU_OK(npuEventRecord(fromOther.get(), other.get()));
  ASSERT_NPU_OK(gateFailed.launchBlocker(failed.get()));
  Probe failing, skipped;
  failing.error = "boom";
  ASSERT_NPU_OK(launchProbe(failed.get(), "fails", &failing));
  ASSERT_NPU_OK(launchProbe(failed.get(), "skipped", &skipped));
  ASSERT_NPU_OK(npuStreamWaitEvent(failed.get(), fromOther.get(), 0));  // a wait after it
  ASSERT_NPU_OK(npuEventRecord(afterFailure.get(), failed.get()));      // a record after it
  std::atomic<bool> waiterRan{false};
  ASSERT_NPU_OK(npuStreamWaitEvent(waiter.get(), afterFailure.get(), 0));
  ASSERT_NPU_OK(npurt::launch(waiter.get(), "waiter", [&] { waiterRan = true; }));
  gateFailed.open();
  gateOther.open();
  EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(waiter.get(), kHangTimeoutUs));
  EXPECT_TRUE(waiterRan.load());
  EXPECT_NPU_OK(npuEventSynchronize(afterFailure.get()));
  EXPECT_NPU_OK(npuEventQuery(afterFailure.get()));
  EXPECT_EQ(skipped.runs.load(), 0);
  EXPECT_EQ(skipped.releases.load(), 1);
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamQuery(failed.get()));
}

TEST_F(FailureTest, ReportedOnceByQueryThenCleared) {
  auto s = makeStream();
  Probe failing;
  failing.error = "q";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  drainWithoutReporting(s.get());
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamQuery(s.get()));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("task 'fails'"), std::string::npos);
  // Cleared: nothing reports it again. (Synchronize first: the stream may
  // still be retiring the record the test waited on, and query would say
  // npuErrorNotReady.)
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_NPU_OK(npuStreamQuery(s.get()));
  EXPECT_NPU_OK(npuDeviceSynchronize());
}

// Note [Op execution timeout]: a task that runs longer than the timeout (here
// by its stream's delay, 50 ms against 5 ms) fails its stream like a failing
// task; 0 turns it off.
TEST_F(FailureTest, TaskLongerThanTheOpTimeoutFailsItsStream) {
  auto slow = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(slow.get(), 50'000));
  ASSERT_NPU_OK(npuSetOpExecuteTimeout(5'000));
  uint64_t us = 0;
  ASSERT_NPU_OK(npuGetOpExecuteTimeout(&us));
  EXPECT_EQ(us, 5'000u);
  Probe timedOut, behind;
  ASSERT_NPU_OK(launchProbe(slow.get(), "slow_op", &timedOut));
  ASSERT_NPU_OK(launchProbe(slow.get(), "behind", &behind));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(slow.get()));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'slow_op' failed"), std::string::npos) << message;
  EXPECT_NE(message.find("op execution timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("timeout of 5000 us"), std::string::npos) << message;
  EXPECT_EQ(timedOut.runs.load(), 1);  // it did run: a task cannot be stopped
  EXPECT_EQ(behind.runs.load(), 0);    // discarded behind the failure
  EXPECT_EQ(behind.releases.load(), 1);
  EXPECT_NPU_OK(npuStreamSynchronize(slow.get()));  // reported once
  ASSERT_NPU_OK(npuSetOpExecuteTimeout(0));
  Probe untimed;
  ASSERT_NPU_OK(launchProbe(slow.get(), "slow_but_untimed", &untimed));
  EXPECT_NPU_OK(npuStreamSynchronize(slow.get()));
  EXPECT_EQ(untimed.runs.load(), 1);
  ASSERT_NPU_OK(npuStreamSetTaskDelay(slow.get(), -1));
  EXPECT_NPU(npuErrorInvalidValue, npuGetOpExecuteTimeout(nullptr));
}

TEST_F(FailureTest, ReportedOnceBySynchronizeThenCleared) {
  auto s = makeStream();
  Probe failing;
  failing.error = "s";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_NPU_OK(npuStreamQuery(s.get()));
}

TEST_F(FailureTest, ReportedOnceBySynchronizeWithTimeoutThenCleared) {
  auto s = makeStream();
  Probe failing;
  failing.error = "t";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
}

TEST_F(FailureTest, ReportedOnceByDeviceSynchronizeThenCleared) {
  auto s = makeStream(1);
  Probe failing;
  failing.error = "d";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails_on_1", &failing));
  drainWithoutReporting(s.get());
  EXPECT_NPU_OK(npuDeviceSynchronize()) << "device 0 has no failure";
  npurt::DeviceGuard guard(1);
  EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'fails_on_1'"), std::string::npos) << message;
  EXPECT_NPU_OK(npuDeviceSynchronize());
  EXPECT_NPU_OK(npuStreamQuery(s.get())) << "device synchronize reported it for the stream";
}

TEST_F(FailureTest, FailureOfADestroyedStreamIsReportedByDeviceSynchronize) {
  Probe failing;
  failing.error = "gone";
  {
    auto s = makeStream();
    ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 20'000));
    ASSERT_NPU_OK(launchProbe(s.get(), "fails_after_destroy", &failing));
  }
  EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
  EXPECT_NPU_OK(npuDeviceSynchronize());
}

TEST_F(FailureTest, TasksEnqueuedBeforeTheReportAreDiscarded) {
  auto s = makeStream();
  Probe failing, late;
  failing.error = "early";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  drainWithoutReporting(s.get());  // the failure happened and is unreported
  ASSERT_NPU_OK(launchProbe(s.get(), "late", &late));
  drainWithoutReporting(s.get());
  EXPECT_EQ(late.runs.load(), 0);
  EXPECT_EQ(late.releases.load(), 1);
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamQuery(s.get()));
}

TEST_F(FailureTest, WorkAfterTheReportRunsNormally) {
  auto s = makeStream();
  Probe failing, after;
  failing.error = "once";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(launchProbe(s.get(), "after", &after));
  std::atomic<bool> callableRan{false};
  ASSERT_NPU_OK(npurt::launch(s.get(), "after2", [&] { callableRan = true; }));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(after.runs.load(), 1);
  EXPECT_EQ(after.releases.load(), 1);
  EXPECT_TRUE(callableRan.load());
}

TEST_F(FailureTest, OtherStreamsAreUnaffected) {
  auto failed = makeStream(0);
  auto healthy = makeStream(0);
  Probe failing, fine;
  failing.error = "local";
  ASSERT_NPU_OK(launchProbe(failed.get(), "fails", &failing));
  drainWithoutReporting(failed.get());
  ASSERT_NPU_OK(launchProbe(healthy.get(), "fine", &fine));
  EXPECT_NPU_OK(npuStreamSynchronize(healthy.get()));
  EXPECT_EQ(fine.runs.load(), 1);
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(failed.get()));
}

TEST_F(FailureTest, ErrorMessageIsTruncatedToTheBuffer) {
  auto s = makeStream();
  std::string longMessage(100000, 'm');
  Probe failing;
  failing.error = longMessage.c_str();
  ASSERT_NPU_OK(launchProbe(s.get(), "long_message", &failing));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'long_message' failed"), std::string::npos);
  EXPECT_NE(message.find("mmmm"), std::string::npos);
}

TEST_F(FailureTest, PeekSeesTheFailureWithoutReportingIt) {
  auto s = makeStream();
  Probe failing;
  failing.error = "peeked";
  EXPECT_NPU_OK(npuStreamPeekAtLastError(s.get())) << "no failure yet";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  drainWithoutReporting(s.get());
  for (int i = 0; i < 2; ++i) {  // peeking twice: still held
    EXPECT_NPU(npuErrorLaunchFailure, npuStreamPeekAtLastError(s.get()));
    std::string message = npuGetLastErrorMessage();
    EXPECT_NE(message.find("task 'fails' failed on stream"), std::string::npos) << message;
    EXPECT_NE(message.find("peeked"), std::string::npos) << message;
  }
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get())) << "peek did not report it";
  EXPECT_NPU_OK(npuStreamPeekAtLastError(s.get())) << "reported: nothing left to peek at";
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(FailureTest, IsIdleSaysNoForAHeldFailureAndLeavesItHeld) {
  auto s = makeStream();
  Probe failing;
  failing.error = "held";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails", &failing));
  drainWithoutReporting(s.get());
  int idle = -1;
  ASSERT_NPU_OK(npuStreamIsIdle(s.get(), &idle));
  EXPECT_EQ(idle, 0) << "a stream holding a failure is not idle for an allocator";
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get())) << "still reported once";
  ASSERT_NPU_OK(npuStreamIsIdle(s.get(), &idle));
  EXPECT_EQ(idle, 1);
}

TEST_F(FailureTest, PeekIsSuccessWhileWorkIsQueued) {
  auto s = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  EXPECT_NPU_OK(npuStreamPeekAtLastError(s.get()));
  gate.open();
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
}

// What the layer above does: a discarded task's release asks why, to poison
// its outputs.
struct PeekFromRelease {
  npuStream_t stream = nullptr;
  std::atomic<int> releases{0};
  npuError_t seen = npuErrorUnknown;
  std::string message;
};

int peekNeverRuns(void*, char*, size_t) { return 0; }
void peekRelease(void* user) {
  auto* p = static_cast<PeekFromRelease*>(user);
  p->seen = npuStreamPeekAtLastError(p->stream);
  p->message = npuGetLastErrorMessage();
  p->releases++;
}

TEST_F(FailureTest, PeekWorksFromTheReleaseOfADiscardedTask) {
  auto s = makeStream();
  auto other = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  Probe failing;
  failing.error = "why";
  ASSERT_NPU_OK(launchProbe(s.get(), "fails_first", &failing));
  PeekFromRelease discarded;
  discarded.stream = s.get();
  npuTask task{"discarded", &peekNeverRuns, &peekRelease, &discarded, 0};
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &task));
  gate.open();
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  EXPECT_EQ(discarded.releases.load(), 1);
  EXPECT_NPU(npuErrorLaunchFailure, discarded.seen);
  EXPECT_NE(discarded.message.find("task 'fails_first'"), std::string::npos) << discarded.message;
  EXPECT_NPU_OK(npuStreamPeekAtLastError(other.get())) << "other streams are unaffected";
}

TEST_F(FailureTest, PeekRejectsBadHandles) {
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuStreamPeekAtLastError(nullptr));
  npuStream_t destroyed = nullptr;
  ASSERT_NPU_OK(npuStreamCreate(&destroyed));
  ASSERT_NPU_OK(npuStreamDestroy(destroyed));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuStreamPeekAtLastError(destroyed));
}

}  // namespace
}  // namespace npurt_test
