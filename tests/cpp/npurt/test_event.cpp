// Covers events: creation flags, record/query/synchronize, never-recorded
// events (query succeeds, waits are no-ops), versioning (a wait binds to the
// version latest when it was called), cross-stream waits that park without
// holding a core (one-core child process), elapsed time and timestamps with
// their error statuses, the device of an event, destroying an event with
// pending versions, and deferred versions (completed by the host; waits on
// them hold no core either). See Note [Event versioning] in
// csrc/npurt/README.md.
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

class EventTest : public NpurtTest {};

TEST_F(EventTest, CreateAcceptsEveryDocumentedFlagCombination) {
  for (unsigned flags : {npuEventDefault, npuEventBlockingSync, npuEventDisableTiming,
                         npuEventBlockingSync | npuEventDisableTiming}) {
    npuEvent_t e = nullptr;
    ASSERT_NPU_OK(npuEventCreateWithFlags(&e, flags));
    EXPECT_NPU_OK(npuEventQuery(e));
    EXPECT_NPU_OK(npuEventDestroy(e));
  }
  npuEvent_t e = nullptr;
  ASSERT_NPU_OK(npuEventCreate(&e));
  EXPECT_NPU_OK(npuEventDestroy(e));
}

TEST_F(EventTest, RecordCompletesAfterEarlierWorkOfTheStream) {
  auto s = makeStream();
  auto e = makeEvent();
  ScopedGate gate;
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "before_record", [&] { ran = true; }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  EXPECT_NPU(npuErrorNotReady, npuEventQuery(e.get()));
  gate.open();
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  EXPECT_TRUE(ran.load());
  EXPECT_NPU_OK(npuEventQuery(e.get()));
}

TEST_F(EventTest, EventSynchronizeBlocksUntilDelayedWorkFinished) {
  auto s = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 30'000));
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) ASSERT_NPU_OK(npurt::launch(s.get(), "w", [&] { ran++; }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  EXPECT_EQ(ran.load(), 3);
}

TEST_F(EventTest, NeverRecordedEventIsCompleteAndWaitsAreNoOps) {
  auto e = makeEvent();
  EXPECT_NPU_OK(npuEventQuery(e.get()));
  EXPECT_NPU_OK(npuEventSynchronize(e.get()));
  int device = 7;
  EXPECT_NPU_OK(npuEventGetDevice(e.get(), &device));
  EXPECT_EQ(device, -1);
  auto s = makeStream();
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npuStreamWaitEvent(s.get(), e.get(), 0));
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_noop_wait", [&] { ran = true; }));
  // If the wait were not a no-op nothing could ever complete it.
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  EXPECT_TRUE(ran.load());
}

TEST_F(EventTest, WaitingStreamRunsOnlyAfterTheRecordedWork) {
  auto producer = makeStream(0);
  auto consumer = makeStream(1);
  auto e = makeEvent();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(producer.get(), 50'000));
  std::atomic<int> value{0};
  int seen = -1;
  ASSERT_NPU_OK(npurt::launch(producer.get(), "write", [&] { value = 42; }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), producer.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(consumer.get(), e.get(), 0));
  ASSERT_NPU_OK(npurt::launch(consumer.get(), "read", [&] { seen = value.load(); }));
  ASSERT_NPU_OK(npuStreamSynchronize(consumer.get()));
  EXPECT_EQ(seen, 42);
}

TEST_F(EventTest, ReRecordDoesNotAffectAnEarlierWait) {
  // Version 1 is recorded behind gate1, the consumer waits on it, then version
  // 2 is recorded behind gate2. Opening gate1 alone must release the consumer.
  auto a = makeStream();
  auto c = makeStream();
  auto consumer = makeStream(1);
  auto e = makeEvent();
  ScopedGate gate1, gate2;
  ASSERT_NPU_OK(gate1.launchBlocker(a.get(), "gate1"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), a.get()));
  std::atomic<bool> consumerRan{false};
  ASSERT_NPU_OK(npuStreamWaitEvent(consumer.get(), e.get(), 0));
  ASSERT_NPU_OK(npurt::launch(consumer.get(), "consumer", [&] { consumerRan = true; }));
  ASSERT_NPU_OK(gate2.launchBlocker(c.get(), "gate2"));
  ASSERT_NPU_OK(npuEventRecord(e.get(), c.get()));
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(consumer.get()));
  gate1.open();
  EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(consumer.get(), kHangTimeoutUs))
      << "the wait must bind to version 1, not the re-recorded version 2";
  EXPECT_TRUE(consumerRan.load());
  EXPECT_NPU(npuErrorNotReady, npuEventQuery(e.get())) << "a query binds to the latest version";
  gate2.open();
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  EXPECT_NPU_OK(npuEventQuery(e.get()));
}

TEST_F(EventTest, WaitBindsToTheLatestVersionAtCallTime) {
  // Version 1 is complete; version 2 is pending behind a gate. A wait called
  // now must wait for version 2.
  auto a = makeStream();
  auto consumer = makeStream();
  auto e = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(e.get(), a.get()));
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(a.get()));
  ASSERT_NPU_OK(npuEventRecord(e.get(), a.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(consumer.get(), e.get(), 0));
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npurt::launch(consumer.get(), "after_v2", [&] { ran = true; }));
  EXPECT_NPU(npuErrorTimeout, npuStreamSynchronizeWithTimeout(consumer.get(), 20'000));
  EXPECT_FALSE(ran.load());
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(consumer.get()));
  EXPECT_TRUE(ran.load());
}

TEST_F(EventTest, ParkedWaitHoldsNoCoreOnOneCore) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "1"}});
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 0));
  ASSERT_EQ(prop.coreCount, 1);
  // The blocker holds the only core while everything is enqueued; then the
  // high-priority waiter is picked first and must park, leaving the core to
  // the low-priority stream whose record completes the event.
  auto blocker = makeStream(0);
  auto low = makeStream(0, npuStreamDefault, 0);
  auto high = makeStream(0, npuStreamDefault, -3);
  auto e = makeEvent();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(blocker.get()));
  ASSERT_TRUE(gate.waitStarted());
  std::mutex mutex;
  std::vector<std::string> order;
  auto log = [&](const char* what) {
    std::lock_guard<std::mutex> lock(mutex);
    order.emplace_back(what);
  };
  ASSERT_NPU_OK(npurt::launch(low.get(), "low_work", [&] { log("low"); }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), low.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(high.get(), e.get(), 0));
  ASSERT_NPU_OK(npurt::launch(high.get(), "high_work", [&] { log("high"); }));
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(high.get(), kHangTimeoutUs))
      << "deadlock: the parked stream kept the only core";
  EXPECT_EQ(order, (std::vector<std::string>{"low", "high"}));
}

TEST_F(EventTest, ChainedWaitsAcrossManyStreamsOnOneCore) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "1"}});
  // Each stream waits on the previous stream's event; streams are created
  // (and made ready) in reverse so every waiter is reached before its event.
  constexpr int kStreams = 8;
  std::vector<npurt::StreamHandle> streams;
  std::vector<npurt::EventHandle> events;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(makeStream(0, npuStreamDefault, -(i % 4)));
    events.push_back(makeEvent());
  }
  ScopedGate gate;
  auto blocker = makeStream(0);
  ASSERT_NPU_OK(gate.launchBlocker(blocker.get()));
  ASSERT_TRUE(gate.waitStarted());
  std::vector<int> order;
  std::mutex mutex;
  for (int i = 0; i < kStreams; ++i) {
    if (i > 0) {
      ASSERT_NPU_OK(npuStreamWaitEvent(streams[i].get(), events[i - 1].get(), 0));
    }
    ASSERT_NPU_OK(npurt::launch(streams[i].get(), "link", [&, i] {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(i);
    }));
    ASSERT_NPU_OK(npuEventRecord(events[i].get(), streams[i].get()));
  }
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(streams.back().get(), kHangTimeoutUs));
  std::vector<int> expected;
  for (int i = 0; i < kStreams; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

TEST_F(EventTest, ElapsedTimeCoversTheDelayedTask) {
  auto s = makeStream();
  auto start = makeEvent();
  auto end = makeEvent();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 20'000));
  ASSERT_NPU_OK(npuEventRecord(start.get(), s.get()));
  ASSERT_NPU_OK(npurt::launch(s.get(), "slow", [] {}));
  ASSERT_NPU_OK(npuEventRecord(end.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(end.get()));
  float ms = -1;
  ASSERT_NPU_OK(npuEventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 20.0f * 0.999f);
}

TEST_F(EventTest, ElapsedTimeOfTimingDisabledEventIsTimingDisabled) {
  auto s = makeStream();
  auto timed = makeEvent();
  auto untimed = makeEvent(npuEventDisableTiming);
  ASSERT_NPU_OK(npuEventRecord(timed.get(), s.get()));
  ASSERT_NPU_OK(npuEventRecord(untimed.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  float ms = 0;
  uint64_t ns = 0;
  EXPECT_NPU(npuErrorTimingDisabled, npuEventElapsedTime(&ms, timed.get(), untimed.get()));
  EXPECT_NPU(npuErrorTimingDisabled, npuEventElapsedTime(&ms, untimed.get(), timed.get()));
  EXPECT_NPU(npuErrorTimingDisabled, npuEventGetTimestamp(untimed.get(), &ns));
  EXPECT_NPU_OK(npuEventQuery(untimed.get())) << "timing-disabled events still synchronise";
}

TEST_F(EventTest, ElapsedTimeOfNeverRecordedEventIsEventNotRecorded) {
  auto s = makeStream();
  auto recorded = makeEvent();
  auto never = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(recorded.get(), s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  float ms = 0;
  uint64_t ns = 0;
  EXPECT_NPU(npuErrorEventNotRecorded, npuEventElapsedTime(&ms, recorded.get(), never.get()));
  EXPECT_NPU(npuErrorEventNotRecorded, npuEventElapsedTime(&ms, never.get(), recorded.get()));
  EXPECT_NPU(npuErrorEventNotRecorded, npuEventGetTimestamp(never.get(), &ns));
}

TEST_F(EventTest, ElapsedTimeOfIncompleteEventIsNotReady) {
  auto s = makeStream();
  auto start = makeEvent();
  auto end = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(start.get(), s.get()));
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npuEventRecord(end.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(start.get()));
  float ms = 0;
  uint64_t ns = 0;
  EXPECT_NPU(npuErrorNotReady, npuEventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_NPU(npuErrorNotReady, npuEventGetTimestamp(end.get(), &ns));
  gate.open();
  ASSERT_NPU_OK(npuEventSynchronize(end.get()));
  EXPECT_NPU_OK(npuEventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 0.0f);
}

TEST_F(EventTest, TimestampIsTheCompletionTimeOnTheRuntimeClock) {
  auto s = makeStream();
  auto e = makeEvent();
  uint64_t taskEnd = 0;
  const uint64_t before = npuGetTimestampNs();
  ASSERT_NPU_OK(npurt::launch(s.get(), "stamp", [&] { taskEnd = npuGetTimestampNs(); }));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
  const uint64_t after = npuGetTimestampNs();
  uint64_t ns = 0;
  ASSERT_NPU_OK(npuEventGetTimestamp(e.get(), &ns));
  EXPECT_GE(ns, before);
  EXPECT_GE(ns, taskEnd) << "a record completes after the work before it";
  EXPECT_LE(ns, after);
}

TEST_F(EventTest, RuntimeClockIsMonotonic) {
  uint64_t previous = npuGetTimestampNs();
  EXPECT_GT(previous, 0u);
  for (int i = 0; i < 10000; ++i) {
    uint64_t now = npuGetTimestampNs();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

TEST_F(EventTest, DeviceIsWhereTheEventWasLastRecorded) {
  auto s0 = makeStream(0);
  auto s1 = makeStream(1);
  auto e = makeEvent();
  int device = 9;
  ASSERT_NPU_OK(npuEventRecord(e.get(), s1.get()));
  ASSERT_NPU_OK(npuEventGetDevice(e.get(), &device));
  EXPECT_EQ(device, 1);
  ASSERT_NPU_OK(npuEventRecord(e.get(), s0.get()));
  ASSERT_NPU_OK(npuEventGetDevice(e.get(), &device));
  EXPECT_EQ(device, 0);
  ASSERT_NPU_OK(npuEventSynchronize(e.get()));
}

TEST_F(EventTest, DestroyingAnEventKeepsBoundWaitsResolvable) {
  auto producer = makeStream();
  auto consumer = makeStream(1);
  ScopedGate gate;
  npuEvent_t e = nullptr;
  ASSERT_NPU_OK(npuEventCreate(&e));
  ASSERT_NPU_OK(gate.launchBlocker(producer.get()));
  ASSERT_NPU_OK(npuEventRecord(e, producer.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(consumer.get(), e, 0));
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npurt::launch(consumer.get(), "after_destroyed_event", [&] { ran = true; }));
  ASSERT_NPU_OK(npuEventDestroy(e));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuEventQuery(e));
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(consumer.get(), kHangTimeoutUs));
  EXPECT_TRUE(ran.load());
}

TEST_F(EventTest, EventSynchronizeFromManyThreads) {
  auto s = makeStream();
  auto e = makeEvent();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
  std::vector<std::future<npuError_t>> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] { return npuEventSynchronize(e.get()); }));
  }
  gate.open();
  for (auto& w : waiters) {
    ASSERT_EQ(w.wait_for(kHangTimeout), std::future_status::ready);
    EXPECT_NPU_OK(w.get());
  }
}

TEST_F(EventTest, EventHandleOwnsTheEvent) {
  npuEvent_t raw = nullptr;
  {
    auto e = npurt::EventHandle::create(npuEventDisableTiming);
    raw = e.get();
    EXPECT_NPU_OK(npuEventQuery(raw));
  }
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuEventQuery(raw));
  EXPECT_THROW(npurt::EventHandle::create(0x40u), npurt::Error);
}

// Many waits on deferred versions on one core: none of them holds the core,
// so an unrelated stream still runs, and completing them releases them all.
TEST_F(EventTest, DeferredVersionsParkWaitersWithoutACore) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "1"}});
  constexpr int kWaiters = 4;
  std::vector<npurt::StreamHandle> waiters;
  std::vector<npurt::EventHandle> events;
  std::vector<npuDeferredRecord_t> records(kWaiters, nullptr);
  std::atomic<int> ran{0};
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(makeStream());
    events.push_back(makeEvent());
    ASSERT_NPU_OK(npuEventRecordDeferred(events.back().get(), &records[static_cast<size_t>(i)]));
    EXPECT_NPU(npuErrorNotReady, npuEventQuery(events.back().get()));
    ASSERT_NPU_OK(npuStreamWaitEvent(waiters.back().get(), events.back().get(), 0));
    ASSERT_NPU_OK(npurt::launch(waiters.back().get(), "after_wait", [&] { ran++; }));
  }
  auto other = makeStream();
  ASSERT_NPU_OK(npurt::launch(other.get(), "unrelated", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(other.get(), kHangTimeoutUs));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(waiters[0].get()));
  // Completed from a task on an executor, as a framework's record would.
  npuDeferredRecord_t first = records[0];
  ASSERT_NPU_OK(npurt::launch(other.get(), "complete",
                              [first] { npurt::check(npuEventCompleteDeferred(first)); }));
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(waiters[0].get(), kHangTimeoutUs));
  for (int i = 1; i < kWaiters; ++i) {
    ASSERT_NPU_OK(npuEventCompleteDeferred(records[static_cast<size_t>(i)]));
  }
  for (auto& w : waiters) ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(w.get(), kHangTimeoutUs));
  EXPECT_EQ(ran.load(), kWaiters);
  EXPECT_NPU_OK(npuEventQuery(events[0].get()));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuEventCompleteDeferred(records[0]));
}

TEST_F(EventTest, DeferredVersionBadArguments) {
  auto e = makeEvent();
  npuDeferredRecord_t record = nullptr;
  EXPECT_NPU(npuErrorInvalidValue, npuEventRecordDeferred(e.get(), nullptr));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuEventRecordDeferred(nullptr, &record));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuEventCompleteDeferred(nullptr));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuEventCompleteDeferred(reinterpret_cast<npuDeferredRecord_t>(e.get())));
  // The version outlives its event's handle.
  ASSERT_NPU_OK(npuEventRecordDeferred(e.get(), &record));
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamWaitEvent(s.get(), e.get(), 0));
  e.reset();
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(s.get()));
  ASSERT_NPU_OK(npuEventCompleteDeferred(record));
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
}

}  // namespace
}  // namespace npurt_test
