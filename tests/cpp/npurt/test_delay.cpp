// Covers Note [Task delay]: the global delay (NPU_SIM_TASK_DELAY_US in a
// child process, npuSetTaskDelay/npuGetTaskDelay) and the per-stream override
// npuStreamSetTaskDelay (reset with -1). The delay makes missing
// synchronisation visible: a reader on another stream that does not wait for
// a delayed writer sees stale data; one that waits on an event sees the
// writer's data. Event records and waits are not delayed.
#include <atomic>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

class DelayTest : public NpurtTest {
 protected:
  // Milliseconds one task takes on `s`, measured with events around it.
  float timeOneTask(npuStream_t s) {
    auto start = makeEvent();
    auto end = makeEvent();
    EXPECT_NPU_OK(npuEventRecord(start.get(), s));
    EXPECT_NPU_OK(npurt::launch(s, "timed", [] {}));
    EXPECT_NPU_OK(npuEventRecord(end.get(), s));
    EXPECT_NPU_OK(npuEventSynchronize(end.get()));
    float ms = -1;
    EXPECT_NPU_OK(npuEventElapsedTime(&ms, start.get(), end.get()));
    return ms;
  }
};

TEST_F(DelayTest, DefaultIsZeroAndSetGetRoundTrips) {
  uint32_t delay = 99;
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 0u);
  ASSERT_NPU_OK(npuSetTaskDelay(1234));
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 1234u);
  ASSERT_NPU_OK(npuSetTaskDelay(0));
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 0u);
}

TEST_F(DelayTest, EnvironmentVariableSetsTheInitialDelay) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_TASK_DELAY_US", "25000"}});
  uint32_t delay = 0;
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 25000u);
  auto s = makeStream();
  EXPECT_GE(timeOneTask(s.get()), 25.0f * 0.999f);
  ASSERT_NPU_OK(npuSetTaskDelay(0));  // overrides the variable
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 0u);
}

TEST_F(DelayTest, GlobalDelayAppliesToEveryWorkTask) {
  ASSERT_NPU_OK(npuSetTaskDelay(20'000));
  auto s = makeStream();
  EXPECT_GE(timeOneTask(s.get()), 20.0f * 0.999f);
  // Copies and memsets are work tasks too.
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 64));
  auto start = makeEvent();
  auto end = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(start.get(), s.get()));
  ASSERT_NPU_OK(npuMemsetAsync(d, 0, 64, s.get()));
  ASSERT_NPU_OK(npuEventRecord(end.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(end.get()));
  float ms = 0;
  ASSERT_NPU_OK(npuEventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 20.0f * 0.999f);
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuFree(d));
}

TEST_F(DelayTest, ReaderThatDoesNotWaitSeesStaleData) {
  // The writer's stream is delayed 300 ms; the reader's stream overrides the
  // delay with 0. Without an event between them the reader runs first.
  ASSERT_NPU_OK(npuSetTaskDelay(300'000));
  auto writer = makeStream(0);
  auto reader = makeStream(1);
  ASSERT_NPU_OK(npuStreamSetTaskDelay(reader.get(), 0));
  std::atomic<int> value{0};
  std::atomic<int> seen{-1};
  ASSERT_NPU_OK(npurt::launch(writer.get(), "writer", [&] { value = 1; }));
  ASSERT_NPU_OK(npurt::launch(reader.get(), "reader", [&] { seen = value.load(); }));
  ASSERT_NPU_OK(npuStreamSynchronize(reader.get()));
  EXPECT_EQ(seen.load(), 0) << "the unsynchronised reader must see stale data";
  ASSERT_NPU_OK(npuStreamSynchronize(writer.get()));
  EXPECT_EQ(value.load(), 1);
}

TEST_F(DelayTest, ReaderThatWaitsOnAnEventSeesTheWritersData) {
  ASSERT_NPU_OK(npuSetTaskDelay(100'000));
  auto writer = makeStream(0);
  auto reader = makeStream(1);
  ASSERT_NPU_OK(npuStreamSetTaskDelay(reader.get(), 0));
  auto written = makeEvent();
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 4096));
  ASSERT_NPU_OK(npuMemset(d, 0, 4096));
  std::vector<unsigned char> host(4096, 0xFF);
  ASSERT_NPU_OK(npuMemsetAsync(d, 0x7E, 4096, writer.get()));
  ASSERT_NPU_OK(npuEventRecord(written.get(), writer.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(reader.get(), written.get(), 0));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d, 4096, npuMemcpyDefault, reader.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(reader.get()));
  EXPECT_EQ(host, std::vector<unsigned char>(4096, 0x7E));
  ASSERT_NPU_OK(npuFree(d));
}

TEST_F(DelayTest, PerStreamDelayOverridesAndResetsToGlobal) {
  auto s = makeStream();
  auto other = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 30'000));
  EXPECT_GE(timeOneTask(s.get()), 30.0f * 0.999f) << "override above a global delay of 0";

  // Global 300 ms; s overridden to 0, so s's reader runs before `other`'s
  // delayed writer (ordering, not timing, shows the override).
  ASSERT_NPU_OK(npuSetTaskDelay(300'000));
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 0));
  std::atomic<int> value{0}, seen{-1};
  ASSERT_NPU_OK(npurt::launch(other.get(), "slow_writer", [&] { value = 1; }));
  ASSERT_NPU_OK(npurt::launch(s.get(), "fast_reader", [&] { seen = value.load(); }));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(seen.load(), 0);
  ASSERT_NPU_OK(npuStreamSynchronize(other.get()));

  // -1 returns s to the global delay.
  ASSERT_NPU_OK(npuSetTaskDelay(20'000));
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), -1));
  EXPECT_GE(timeOneTask(s.get()), 20.0f * 0.999f);
}

TEST_F(DelayTest, EventRecordsAndWaitsAreNotDelayed) {
  // With a 10 s delay, a stream holding only records and waits must still
  // finish well within the hang timeout.
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 10'000'000));
  auto e1 = makeEvent();
  auto e2 = makeEvent();
  ASSERT_NPU_OK(npuEventRecord(e1.get(), s.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(s.get(), e1.get(), 0));
  ASSERT_NPU_OK(npuEventRecord(e2.get(), s.get()));
  EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), 5'000'000));
}

}  // namespace
}  // namespace npurt_test
