// Stress tests (sizes scaled by NPURT_STRESS_SCALE for sanitizer builds):
// many host threads launching onto shared streams of two devices, checked
// against the gold result (every task runs exactly once, each producer's
// order within a stream preserved), for 1, 2 and 8 producers; an event
// ping-pong across devices re-recording the same events; and concurrent
// create/destroy/query churn with stale handles checked from another thread.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

constexpr int kStreams = 2;

// Log of one stream. Only one task of a stream runs at a time, so the tasks
// append without a lock; the runtime must order them (TSan checks it does).
struct StreamLog {
  std::vector<uint64_t> entries;  // (producer << 32) | seq
};

StreamLog gLogs[kStreams];

template <int S>
void appendEntry(void* packed) {
  gLogs[S].entries.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(packed)));
}

class StressTest : public NpurtTest, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    NpurtTest::SetUp();
    for (auto& log : gLogs) log.entries.clear();
  }
};

TEST_P(StressTest, MultiProducerTasksRunExactlyOnceInProducerOrder) {
  const int producers = GetParam();
  const int perProducer = std::max(1000, static_cast<int>(100'000 * stressScale()));
  auto s0 = makeStream(0);
  auto s1 = makeStream(1);
  npuStream_t streams[kStreams] = {s0.get(), s1.get()};
  for (auto& log : gLogs) log.entries.reserve(static_cast<size_t>(producers) * perProducer);
  std::atomic<int> launchErrors{0};
  std::atomic<int> callableRuns{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int seq = 0; seq < perProducer; ++seq) {
        const int target = (seq + p) % kStreams;  // producers interleave differently
        const uint64_t packed = (static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(seq);
        void* user = reinterpret_cast<void*>(static_cast<uintptr_t>(packed));
        npuError_t st;
        if (seq % 8 == 7) {
          // Every eighth task goes through npurt::launch (allocating path).
          st = npurt::launch(streams[target], "stress_callable", [target, packed, &callableRuns] {
            gLogs[target].entries.push_back(packed);
            callableRuns.fetch_add(1, std::memory_order_relaxed);
          });
        } else {
          st = npuLaunchHostFunc(streams[target], target == 0 ? &appendEntry<0> : &appendEntry<1>,
                                 user);
        }
        if (st != npuSuccess) launchErrors++;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NPU_OK(npuStreamSynchronize(s0.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  ASSERT_EQ(launchErrors.load(), 0);

  // Gold result: for each (stream, producer), exactly the seqs sent there, in order.
  for (int s = 0; s < kStreams; ++s) {
    std::vector<int64_t> next(producers, -1);
    std::vector<int64_t> count(producers, 0);
    for (uint64_t entry : gLogs[s].entries) {
      const int p = static_cast<int>(entry >> 32);
      const int64_t seq = static_cast<int64_t>(entry & 0xffffffffu);
      ASSERT_LT(p, producers);
      ASSERT_EQ((seq + p) % kStreams, s) << "task ran on the wrong stream";
      ASSERT_GT(seq, next[p]) << "producer " << p << " reordered on stream " << s;
      next[p] = seq;
      count[p]++;
    }
    for (int p = 0; p < producers; ++p) {
      int64_t expected = 0;
      for (int seq = 0; seq < perProducer; ++seq) expected += ((seq + p) % kStreams == s);
      EXPECT_EQ(count[p], expected) << "producer " << p << " on stream " << s;
    }
  }
  const size_t total = gLogs[0].entries.size() + gLogs[1].entries.size();
  EXPECT_EQ(total, static_cast<size_t>(producers) * perProducer);
  int expectedCallables = 0;
  for (int seq = 0; seq < perProducer; ++seq) expectedCallables += (seq % 8 == 7);
  EXPECT_EQ(callableRuns.load(), expectedCallables * producers);
}

INSTANTIATE_TEST_SUITE_P(Producers, StressTest, ::testing::Values(1, 2, 8),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "Producers";
                         });

class StressChurnTest : public NpurtTest {};

TEST_F(StressChurnTest, EventPingPongAcrossDevices) {
  // Two streams on two devices take turns through two re-recorded events; a
  // plain (non-atomic) counter proves the turns never overlap.
  const int rounds = std::max(200, static_cast<int>(5'000 * stressScale()));
  auto a = makeStream(0);
  auto b = makeStream(1);
  auto aDone = makeEvent(npuEventDisableTiming);
  auto bDone = makeEvent(npuEventDisableTiming);
  int64_t counter = 0;
  std::vector<int> turns;
  for (int i = 0; i < rounds; ++i) {
    if (i > 0) {
      ASSERT_NPU_OK(npuStreamWaitEvent(a.get(), bDone.get(), 0));
    }
    ASSERT_NPU_OK(npurt::launch(a.get(), "ping", [&] {
      counter++;
      turns.push_back(0);
    }));
    ASSERT_NPU_OK(npuEventRecord(aDone.get(), a.get()));
    ASSERT_NPU_OK(npuStreamWaitEvent(b.get(), aDone.get(), 0));
    ASSERT_NPU_OK(npurt::launch(b.get(), "pong", [&] {
      counter++;
      turns.push_back(1);
    }));
    ASSERT_NPU_OK(npuEventRecord(bDone.get(), b.get()));
  }
  ASSERT_NPU_OK(npuEventSynchronize(bDone.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(a.get()));
  EXPECT_EQ(counter, 2 * rounds);
  ASSERT_EQ(turns.size(), static_cast<size_t>(2 * rounds));
  for (size_t i = 0; i < turns.size(); ++i) ASSERT_EQ(turns[i], static_cast<int>(i % 2)) << i;
}

TEST_F(StressChurnTest, ConcurrentCreateDestroyQuery) {
  const int iterations = std::max(100, static_cast<int>(2'000 * stressScale()));
  constexpr int kWorkers = 4;
  std::atomic<int64_t> launched{0};
  std::atomic<int64_t> ran{0};
  std::atomic<int> unexpected{0};
  std::mutex deadMutex;
  std::vector<npuStream_t> dead;  // destroyed handles, checked by the watcher
  std::atomic<bool> stop{false};

  std::thread watcher([&] {
    while (!stop.load()) {
      std::vector<npuStream_t> snapshot;
      {
        std::lock_guard<std::mutex> lock(deadMutex);
        snapshot = dead;
      }
      for (npuStream_t s : snapshot) {
        if (npuStreamQuery(s) != npuErrorInvalidResourceHandle) unexpected++;
        uint64_t id = 0;
        if (npuStreamGetId(s, &id) != npuErrorInvalidResourceHandle) unexpected++;
      }
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      if (npuSetDevice(w % 2) != npuSuccess) unexpected++;
      npuEvent_t e = nullptr;
      if (npuEventCreateWithFlags(&e, npuEventDisableTiming) != npuSuccess) {
        unexpected++;
        return;
      }
      for (int i = 0; i < iterations; ++i) {
        npuStream_t s = nullptr;
        if (npuStreamCreateWithPriority(&s, npuStreamNonBlocking, -(i % 4)) != npuSuccess) {
          unexpected++;
          continue;
        }
        for (int k = 0; k < 3; ++k) {
          if (npurt::launch(s, "churn", [&ran] { ran++; }) == npuSuccess) {
            launched++;
          } else {
            unexpected++;
          }
        }
        npuError_t q = npuStreamQuery(s);
        if (q != npuSuccess && q != npuErrorNotReady) unexpected++;
        if (npuEventRecord(e, s) != npuSuccess) unexpected++;
        q = npuEventQuery(e);
        if (q != npuSuccess && q != npuErrorNotReady) unexpected++;
        if (i % 2 == 0 && npuStreamSynchronize(s) != npuSuccess) unexpected++;
        if (npuStreamDestroy(s) != npuSuccess) unexpected++;
        if (npuStreamQuery(s) != npuErrorInvalidResourceHandle) unexpected++;
        if (i % 16 == 0) {
          std::lock_guard<std::mutex> lock(deadMutex);
          dead.push_back(s);
        }
      }
      if (npuEventSynchronize(e) != npuSuccess) unexpected++;
      if (npuEventDestroy(e) != npuSuccess) unexpected++;
    });
  }
  for (auto& t : workers) t.join();
  stop = true;
  watcher.join();
  for (int d = 0; d < 2; ++d) {
    npurt::DeviceGuard guard(d);
    ASSERT_NPU_OK(npuDeviceSynchronize());
  }
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(ran.load(), launched.load()) << "every task of a destroyed stream still runs";
  EXPECT_EQ(launched.load(), int64_t{kWorkers} * iterations * 3);
}

}  // namespace
}  // namespace npurt_test
