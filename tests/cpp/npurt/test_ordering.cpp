// Covers the agreement between event completion and stream idleness (Note
// [Event versioning] in csrc/npurt/README.md, "completion order"): once an
// event recorded as the last task of a stream is seen complete, the stream
// queries idle, and once a stream is synchronized, every event recorded on it
// queries complete. These are races by nature (the window, if any, is a few
// instructions wide), so each test hammers the pattern many times; a runtime
// that publishes the two facts separately fails them within a few hundred
// iterations on a loaded machine.
//
// Also covers deep queues: tasks queued far beyond any internal buffer, from
// several producers while the stream is held by a gate, all run exactly once,
// in each producer's order, with release called once per task.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

class OrderingTest : public NpurtTest {
 protected:
  static int iterations() { return std::max(500, static_cast<int>(5'000 * stressScale())); }
};

// A task short enough that the record right behind it completes while the
// host thread is already waiting.
void shortTask(void* counter) {
  static_cast<std::atomic<int>*>(counter)->fetch_add(1, std::memory_order_relaxed);
}

TEST_F(OrderingTest, EventSynchronizeOfLastRecordMeansStreamIdle) {
  auto s = makeStream();
  auto e = makeEvent();
  std::atomic<int> ran{0};
  for (int i = 0; i < iterations(); ++i) {
    ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &shortTask, &ran));
    ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
    ASSERT_NPU_OK(npuEventSynchronize(e.get()));
    ASSERT_NPU_OK(npuStreamQuery(s.get())) << "iteration " << i;
  }
  EXPECT_EQ(ran.load(), iterations());
}

TEST_F(OrderingTest, EventQuerySuccessOfLastRecordMeansStreamIdle) {
  auto s = makeStream();
  auto e = makeEvent();
  std::atomic<int> ran{0};
  for (int i = 0; i < iterations(); ++i) {
    ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &shortTask, &ran));
    ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
    npuError_t status = npuErrorNotReady;
    while ((status = npuEventQuery(e.get())) == npuErrorNotReady) std::this_thread::yield();
    ASSERT_NPU_OK(status);
    ASSERT_NPU_OK(npuStreamQuery(s.get())) << "iteration " << i;
  }
}

TEST_F(OrderingTest, StreamSynchronizeCompletesEveryRecordedEvent) {
  auto s = makeStream();
  auto first = makeEvent();
  auto last = makeEvent();
  std::atomic<int> ran{0};
  for (int i = 0; i < iterations(); ++i) {
    ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &shortTask, &ran));
    ASSERT_NPU_OK(npuEventRecord(first.get(), s.get()));
    ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &shortTask, &ran));
    ASSERT_NPU_OK(npuEventRecord(last.get(), s.get()));
    ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    ASSERT_NPU_OK(npuEventQuery(first.get())) << "iteration " << i;
    ASSERT_NPU_OK(npuEventQuery(last.get())) << "iteration " << i;
  }
}

TEST_F(OrderingTest, StreamQuerySuccessCompletesEveryRecordedEvent) {
  auto s = makeStream();
  auto e = makeEvent();
  std::atomic<int> ran{0};
  for (int i = 0; i < iterations(); ++i) {
    ASSERT_NPU_OK(npuLaunchHostFunc(s.get(), &shortTask, &ran));
    ASSERT_NPU_OK(npuEventRecord(e.get(), s.get()));
    npuError_t status = npuErrorNotReady;
    while ((status = npuStreamQuery(s.get())) == npuErrorNotReady) std::this_thread::yield();
    ASSERT_NPU_OK(status);
    ASSERT_NPU_OK(npuEventQuery(e.get())) << "iteration " << i;
  }
}

// Tasks of a deep queue log (producer, sequence) and count their releases.
struct DeepLog {
  std::vector<uint64_t> entries;  // only one task of a stream runs at a time
  std::atomic<int> released{0};
};

struct DeepTask {
  DeepLog* log;
  uint64_t entry;
};

int runDeepTask(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  auto* task = static_cast<DeepTask*>(user);
  task->log->entries.push_back(task->entry);
  return 0;
}

void releaseDeepTask(void* user) {
  auto* task = static_cast<DeepTask*>(user);
  task->log->released.fetch_add(1, std::memory_order_relaxed);
  delete task;
}

TEST_F(OrderingTest, DeepQueueFromSeveralProducersKeepsEachProducersOrder) {
  constexpr int kProducers = 4;
  // Far more than a stream could buffer without growing or spilling, twice:
  // the second round runs on whatever the first one left behind.
  const int perProducer = std::max(2'000, static_cast<int>(20'000 * stressScale()));
  auto s = makeStream();
  for (int round = 0; round < 2; ++round) {
    DeepLog log;
    ScopedGate gate;
    ASSERT_NPU_OK(gate.launchBlocker(s.get()));
    std::vector<std::thread> producers;
    std::atomic<bool> failed{false};
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        for (int i = 0; i < perProducer; ++i) {
          auto* task = new DeepTask{
              &log, (uint64_t{static_cast<uint32_t>(p)} << 32) | static_cast<uint32_t>(i)};
          const npuTask t{"deep", &runDeepTask, &releaseDeepTask, task, 0u};
          if (npuLaunchTask(s.get(), &t) != npuSuccess) {
            delete task;
            failed = true;
            return;
          }
        }
      });
    }
    for (std::thread& t : producers) t.join();
    ASSERT_FALSE(failed.load());
    EXPECT_NPU(npuErrorNotReady, npuStreamQuery(s.get()));
    gate.open();
    ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
    ASSERT_EQ(log.entries.size(), static_cast<size_t>(kProducers) * perProducer);
    EXPECT_EQ(log.released.load(), kProducers * perProducer);
    std::vector<int64_t> next(kProducers, 0);
    for (uint64_t entry : log.entries) {
      const auto producer = static_cast<size_t>(entry >> 32);
      const auto seq = static_cast<int64_t>(entry & 0xFFFFFFFFu);
      ASSERT_LT(producer, next.size());
      ASSERT_EQ(seq, next[producer]) << "producer " << producer << " out of order";
      ++next[producer];
    }
  }
}

}  // namespace
}  // namespace npurt_test
