// Covers the device race detector (Note [Happens-before model] in
// csrc/npurt/src/racecheck/racecheck.h): unordered accesses of two streams
// are reported once, naming both tasks, their streams and ranges, as a
// failure of the racing task's stream (error mode) or on stderr (log mode);
// synchronized patterns are quiet: same stream, event record/wait, host
// synchronization (stream, event, device, query), a wait on a completed
// event, deferred versions, graph replays, memory handed out again, reads
// shared by streams. Also the declaration API's bad inputs.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

constexpr size_t kBytes = 4096;

class RaceCheckTest : public NpurtTest {
 protected:
  void SetUp() override {
    NpurtTest::SetUp();
    ASSERT_NPU_OK(npuRaceCheckSetMode(npuRaceCheckError));
    ASSERT_NPU_OK(npuMalloc(&buf_, kBytes));
    ASSERT_NPU_OK(npuRaceCheckGetReportCount(&reportsBefore_));
  }
  void TearDown() override {
    (void)npuDeviceSynchronize();
    (void)npuRaceCheckSetMode(npuRaceCheckOff);
    (void)npuFree(buf_);
    NpurtTest::TearDown();
  }

  // Launches a task that declares `mode` on [buf_ + offset, + bytes).
  static npuError_t touch(npuStream_t s, const char* name, void* p, size_t bytes,
                          unsigned mode) {
    return npurt::launch(s, name, {{p, bytes, mode}}, [] {});
  }
  npuError_t write(npuStream_t s, const char* name) {
    return touch(s, name, buf_, kBytes, npuMemAccessWrite);
  }
  npuError_t read(npuStream_t s, const char* name) {
    return touch(s, name, buf_, kBytes, npuMemAccessRead);
  }
  uint64_t newReports() const {
    uint64_t n = 0;
    EXPECT_NPU_OK(npuRaceCheckGetReportCount(&n));
    return n - reportsBefore_;
  }
  // Expects no report and a clean device synchronize.
  void expectQuiet() {
    EXPECT_NPU_OK(npuDeviceSynchronize());
    EXPECT_EQ(newReports(), 0u);
  }
  // Expects exactly one report, surfacing at device synchronize, that names
  // both tasks.
  void expectRace(const std::string& a, const std::string& b) {
    EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
    const std::string message = npuGetLastErrorMessage();
    EXPECT_NE(message.find("data race"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + a + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + b + "'"), std::string::npos) << message;
    EXPECT_EQ(newReports(), 1u);
    EXPECT_NPU_OK(npuDeviceSynchronize()) << "reported once";
    reportsBefore_ += 1;  // later expectations count from here
  }

  void* buf_ = nullptr;
  uint64_t reportsBefore_ = 0;
};

TEST_F(RaceCheckTest, TwoStreamsWritingTheSameMemoryRace) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(write(s1.get(), "writer_one"));
  ASSERT_NPU_OK(write(s2.get(), "writer_two"));
  expectRace("writer_one", "writer_two");
}

TEST_F(RaceCheckTest, ReportNamesStreamsAndRanges) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(write(s1.get(), "w1"));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  // Only the second half overlaps.
  char* half = static_cast<char*>(buf_) + kBytes / 2;
  ASSERT_NPU_OK(touch(s1.get(), "w2", buf_, kBytes, npuMemAccessWrite));
  ASSERT_NPU_OK(touch(s2.get(), "r2", half, kBytes / 2, npuMemAccessRead));
  EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
  const std::string message = npuGetLastErrorMessage();
  uint64_t id1 = 0;
  uint64_t id2 = 0;
  ASSERT_NPU_OK(npuStreamGetId(s1.get(), &id1));
  ASSERT_NPU_OK(npuStreamGetId(s2.get(), &id2));
  EXPECT_NE(message.find("on stream " + std::to_string(id1) + " (device 0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("on stream " + std::to_string(id2) + " (device 0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(2048 bytes)"), std::string::npos) << message;  // the overlap
  EXPECT_NE(message.find("(4096 bytes)"), std::string::npos) << message;  // w2's range
  char last[1024];
  ASSERT_NPU_OK(npuRaceCheckGetLastReport(last, sizeof last));
  EXPECT_NE(message.find(last), std::string::npos) << last;
}

TEST_F(RaceCheckTest, ReadAndWriteOfTwoStreamsRace) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(read(s1.get(), "reader"));
  ASSERT_NPU_OK(write(s2.get(), "writer"));
  expectRace("reader", "writer");
}

TEST_F(RaceCheckTest, ReadsOfTwoStreamsDoNotRace) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(read(s1.get(), "reader_one"));
  ASSERT_NPU_OK(read(s2.get(), "reader_two"));
  expectQuiet();
}

TEST_F(RaceCheckTest, DisjointRangesDoNotRace) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  char* p = static_cast<char*>(buf_);
  ASSERT_NPU_OK(touch(s1.get(), "low", p, kBytes / 2, npuMemAccessWrite));
  ASSERT_NPU_OK(touch(s2.get(), "high", p + kBytes / 2, kBytes / 2, npuMemAccessWrite));
  expectQuiet();
}

TEST_F(RaceCheckTest, StreamOrderIsQuiet) {
  auto s = makeStream();
  for (int i = 0; i < 10; ++i) {
    ASSERT_NPU_OK(write(s.get(), "w"));
    ASSERT_NPU_OK(read(s.get(), "r"));
  }
  expectQuiet();
}

TEST_F(RaceCheckTest, EventRecordAndWaitOrderTheStreams) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  ScopedGate gate;  // keeps the record pending, so the wait really waits
  ASSERT_NPU_OK(gate.launchBlocker(s1.get()));
  ASSERT_NPU_OK(write(s1.get(), "producer"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(s2.get(), e.get(), 0));
  ASSERT_NPU_OK(write(s2.get(), "consumer"));
  // Back: s1 overwrites after waiting for s2's consumer.
  auto back = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(back.get(), s2.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(s1.get(), back.get(), 0));
  ASSERT_NPU_OK(write(s1.get(), "overwrite"));
  gate.open();
  expectQuiet();
}

TEST_F(RaceCheckTest, WorkBeforeTheRecordedEventIsNotCovered) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s1.get()));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  ASSERT_NPU_OK(write(s1.get(), "after_record"));  // not covered by e
  ASSERT_NPU_OK(npuStreamWaitEvent(s2.get(), e.get(), 0));
  ASSERT_NPU_OK(write(s2.get(), "after_wait"));
  gate.open();
  expectRace("after_record", "after_wait");
}

TEST_F(RaceCheckTest, HostStreamSynchronizeOrdersLaterLaunches) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(write(s1.get(), "first"));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  ASSERT_NPU_OK(write(s2.get(), "second"));
  expectQuiet();
}

TEST_F(RaceCheckTest, HostEventSynchronizeAndQueryOrderLaterLaunches) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(write(s1.get(), "first"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  ASSERT_NPU_OK(write(s2.get(), "second"));
  ASSERT_NPU_OK(npuStreamSynchronize(s2.get()));
  // A query that reports completion orders too.
  ASSERT_NPU_OK(write(s1.get(), "third"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  while (npuEventQuery(e.get()) == npuErrorNotReady) {
  }
  ASSERT_NPU_OK(write(s2.get(), "fourth"));
  expectQuiet();
}

TEST_F(RaceCheckTest, HostDeviceSynchronizeAndStreamQueryOrderLaterLaunches) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(write(s1.get(), "first"));
  ASSERT_NPU_OK(npuDeviceSynchronize());
  ASSERT_NPU_OK(write(s2.get(), "second"));
  while (npuStreamQuery(s2.get()) == npuErrorNotReady) {
  }
  ASSERT_NPU_OK(write(s1.get(), "third"));
  expectQuiet();
}

TEST_F(RaceCheckTest, WaitOnACompletedEventOrdersLikeTheHost) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(write(s1.get(), "first"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  while (npuEventQuery(e.get()) == npuErrorNotReady) {
  }
  ASSERT_NPU_OK(npuStreamWaitEvent(s2.get(), e.get(), 0));  // complete: enqueues nothing
  ASSERT_NPU_OK(write(s2.get(), "second"));
  expectQuiet();
}

TEST_F(RaceCheckTest, DeferredVersionCompletedByATaskOrdersTheWaiter) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  auto e = makeEvent();
  npuDeferredRecord_t record = nullptr;
  ASSERT_NPU_OK(npuEventRecordDeferred(e.get(), &record));
  // The wait is enqueued before the work it waits for.
  ASSERT_NPU_OK(npuStreamWaitEvent(s2.get(), e.get(), 0));
  ASSERT_NPU_OK(write(s2.get(), "waiter"));
  ASSERT_NPU_OK(write(s1.get(), "producer"));
  ASSERT_NPU_OK(npurt::launch(s1.get(), "open", [record] {
    if (npuEventCompleteDeferred(record) != npuSuccess) throw std::runtime_error("complete");
  }));
  expectQuiet();
}

TEST_F(RaceCheckTest, CopiesAndMemsetsDeclareTheirDeviceSides) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  void* other = nullptr;
  ASSERT_NPU_OK(npuMalloc(&other, kBytes));
  ASSERT_NPU_OK(npuMemcpyAsync(buf_, other, kBytes, npuMemcpyDeviceToDevice, s1.get()));
  ASSERT_NPU_OK(npuMemsetAsync(buf_, 0, kBytes, s2.get()));
  expectRace("npuMemcpyAsync", "npuMemsetAsync");
  // The source side is a read: another read of it does not race.
  ASSERT_NPU_OK(npuMemcpyAsync(buf_, other, kBytes, npuMemcpyDeviceToDevice, s1.get()));
  ASSERT_NPU_OK(touch(s2.get(), "reads_source", other, kBytes, npuMemAccessRead));
  expectQuiet();
  // A host side is not checked: one stream reads a host buffer, then another
  // writes it, and nothing the detector sees orders the two. The host waits
  // for the read through an atomic (invisible to the detector), so that the
  // host memory itself does not race: ThreadSanitizer builds would rightly
  // report that.
  std::vector<char> host(kBytes);
  ASSERT_NPU_OK(npuMemcpyAsync(buf_, host.data(), kBytes, npuMemcpyHostToDevice, s1.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(other, host.data(), kBytes, npuMemcpyHostToDevice, s2.get()));
  std::atomic<bool> read{false};
  ASSERT_NPU_OK(npurt::launch(s2.get(), "after_read", [&read] { read = true; }));
  while (!read.load()) {
  }
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), buf_, kBytes, npuMemcpyDeviceToHost, s1.get()));
  expectQuiet();
  EXPECT_NPU_OK(npuFree(other));
}

TEST_F(RaceCheckTest, HostFunctionsAndCopiedNamesDeclareToo) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  static int token = 0;
  const npuMemAccess access{buf_, kBytes, npuMemAccessWrite};
  ASSERT_NPU_OK(npuTaskDeclareAccesses(&token, &access, 1));
  ASSERT_NPU_OK(npuLaunchHostFunc(s1.get(), [](void*) {}, &token));
  ASSERT_NPU_OK(npurt::launch(s2.get(), std::string("copied_name").c_str(),
                              {{buf_, kBytes, npuMemAccessWrite}}, [] {}, true));
  expectRace("npuLaunchHostFunc", "copied_name");
}

TEST_F(RaceCheckTest, ResetRangeForgetsTheHistory) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  std::atomic<bool> done{false};
  ASSERT_NPU_OK(npurt::launch(s1.get(), "old_owner", {{buf_, kBytes, npuMemAccessWrite}},
                              [&done] { done = true; }));
  while (!done.load()) {  // finished, but no synchronization the detector sees
  }
  ASSERT_NPU_OK(npuRaceCheckResetRange(buf_, kBytes));  // what an allocator does
  ASSERT_NPU_OK(write(s2.get(), "new_owner"));
  expectQuiet();
}

TEST_F(RaceCheckTest, MallocOfReusedMemoryStartsClean) {
  auto s1 = makeStream();
  auto s2 = makeStream();
  std::atomic<bool> done{false};
  ASSERT_NPU_OK(npurt::launch(s1.get(), "old_owner", {{buf_, kBytes, npuMemAccessWrite}},
                              [&done] { done = true; }));
  while (!done.load()) {
  }
  // Whatever address npuMalloc returns, its range has no history.
  void* fresh = nullptr;
  ASSERT_NPU_OK(npuFree(buf_));
  ASSERT_NPU_OK(npuMalloc(&fresh, kBytes));
  buf_ = fresh;
  ASSERT_NPU_OK(write(s2.get(), "new_owner"));
  expectQuiet();
}

TEST_F(RaceCheckTest, GraphReplaysAreOrderedByTheirStream) {
  auto s = makeStream();
  auto side = makeStream();
  auto fork = makeEvent();
  auto join = makeEvent();
  char* p = static_cast<char*>(buf_);
  ASSERT_NPU_OK(npuStreamBeginCapture(s.get(), npuStreamCaptureModeGlobal));
  ASSERT_NPU_OK(touch(s.get(), "node_a", p, kBytes / 2, npuMemAccessWrite));
  ASSERT_NPU_OK(npuEventRecord(fork.get(), s.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(side.get(), fork.get(), 0));
  ASSERT_NPU_OK(touch(side.get(), "node_b", p + kBytes / 2, kBytes / 2, npuMemAccessWrite));
  ASSERT_NPU_OK(npuEventRecord(join.get(), side.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(s.get(), join.get(), 0));
  ASSERT_NPU_OK(touch(s.get(), "node_c", p, kBytes, npuMemAccessRead));
  npurt::GraphHandle graph = npurt::endCapture(s.get());
  npurt::GraphExecHandle exec = npurt::instantiate(graph.get());
  for (int i = 0; i < 5; ++i) ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(write(s.get(), "after_replays"));
  expectQuiet();
  // A replay and an unordered eager task on another stream race.
  auto other = makeStream();
  ASSERT_NPU_OK(npuGraphLaunch(exec.get(), s.get()));
  ASSERT_NPU_OK(touch(other.get(), "eager", p, kBytes, npuMemAccessWrite));
  EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("'eager'"), std::string::npos) << message;
  EXPECT_NE(message.find("'node_"), std::string::npos) << message;
}

TEST_F(RaceCheckTest, LogModeReportsOnStderrAndRunsTheTask) {
  ASSERT_NPU_OK(npuRaceCheckSetMode(npuRaceCheckLog));
  auto s1 = makeStream();
  auto s2 = makeStream();
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npurt::launch(s1.get(), "a", {{buf_, kBytes, npuMemAccessWrite}}, [&] { ran++; }));
  ASSERT_NPU_OK(npurt::launch(s2.get(), "b", {{buf_, kBytes, npuMemAccessWrite}}, [&] { ran++; }));
  EXPECT_NPU_OK(npuDeviceSynchronize());
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(newReports(), 1u);
  char last[1024];
  ASSERT_NPU_OK(npuRaceCheckGetLastReport(last, sizeof last));
  EXPECT_NE(std::string(last).find("data race"), std::string::npos) << last;
}

TEST_F(RaceCheckTest, OffReportsNothing) {
  ASSERT_NPU_OK(npuRaceCheckSetMode(npuRaceCheckOff));
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(write(s1.get(), "a"));
  ASSERT_NPU_OK(write(s2.get(), "b"));
  expectQuiet();
}

TEST_F(RaceCheckTest, EnvironmentSelectsTheMode) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_RACECHECK", "log"}});
  npuRaceCheckMode mode = npuRaceCheckOff;
  (void)npuRaceCheckSetMode(npuRaceCheckLog);  // undo the fixture's error mode
  ASSERT_NPU_OK(npuRaceCheckGetMode(&mode));
  EXPECT_EQ(mode, npuRaceCheckLog);
}

TEST(RaceCheckConfigTest, BadEnvironmentValueIsAnInitializationError) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_RACECHECK", "yes"}});
  int count = 0;
  EXPECT_NPU(npuErrorInitializationError, npuGetDeviceCount(&count));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("NPU_SIM_RACECHECK must be"),
            std::string::npos);
}

TEST_F(RaceCheckTest, BadArgumentsAreRejected) {
  const npuMemAccess good{buf_, 8, npuMemAccessRead};
  const npuMemAccess badMode{buf_, 8, 4u};
  const npuMemAccess noMode{buf_, 8, 0u};
  static int token = 0;
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDeclareAccesses(nullptr, &good, 1));
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDeclareAccesses(&token, nullptr, 1));
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDeclareAccesses(&token, &badMode, 1));
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDeclareAccesses(&token, &noMode, 1));
  EXPECT_NPU_OK(npuTaskDeclareAccesses(&token, nullptr, 0));  // withdraws nothing: fine
  EXPECT_NPU(npuErrorInvalidValue, npuRaceCheckSetMode(static_cast<npuRaceCheckMode>(7)));
  EXPECT_NPU(npuErrorInvalidValue, npuRaceCheckGetMode(nullptr));
  EXPECT_NPU(npuErrorInvalidValue, npuRaceCheckGetReportCount(nullptr));
  char buf[4];
  EXPECT_NPU(npuErrorInvalidValue, npuRaceCheckGetLastReport(nullptr, 4));
  EXPECT_NPU(npuErrorInvalidValue, npuRaceCheckGetLastReport(buf, 0));
  // Host memory is not checked: declaring it is accepted and ignored.
  int host[2] = {0, 0};
  const npuMemAccess hostAccess{host, sizeof host, npuMemAccessWrite};
  EXPECT_NPU_OK(npuTaskDeclareAccesses(&token, &hostAccess, 1));
}

}  // namespace
}  // namespace npurt_test
