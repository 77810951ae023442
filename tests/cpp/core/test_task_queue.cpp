// Concurrency tests of the framework core's task queue (c10_npu::queue):
// several producer threads launching onto shared and separate streams, drains
// from other threads while they push, and event records/waits across streams
// and devices. Results are checked against gold values computed on the host.
//
// The data the tasks touch is deliberately NOT atomic: only the ordering the
// task queue and the runtime promise (tasks of one stream run in order, one at
// a time; an event wait orders a stream after the recorded work; synchronize
// orders the host after the stream) makes these accesses race-free. Under
// ThreadSanitizer (scripts/sanitize.sh core-thread) a missing happens-before
// edge anywhere in queue -> consumer -> npurt -> executor is a report, not
// just a flaky value.
//
// The suite runs in the default mode (TASK_QUEUE_ENABLE=1) and, through extra
// CTest entries (CMakeLists.txt here), with PER_STREAM_QUEUE=1,
// TASK_QUEUE_ENABLE=2 and TASK_QUEUE_ENABLE=0. NPU_CORE_STRESS_SCALE (default 1)
// scales the task counts (the sanitizer scripts lower it).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "core/TaskQueue.h"
#include "test_launch.h"
#include "npurt/npurt.h"

namespace {

using c10_npu::NPUStream;

template <typename F>
void launch(const NPUStream& s, F&& f) {
  npu_core_test::launch(s, std::forward<F>(f), "task_queue_test");
}

int scaled(int n) {
  double scale = 1.0;
  if (const char* v = std::getenv("NPU_CORE_STRESS_SCALE")) scale = std::atof(v);
  if (!(scale > 0)) scale = 1.0;
  return std::max(1, static_cast<int>(n * scale));
}

// Every producer launches onto one shared stream and onto its own stream.
// Shared stream: each producer's tasks must run in its launch order (the
// index it expects next is a plain int only tasks of that stream touch) and
// all of them must run (total). Own stream: a plain accumulator against the
// gold sum. A second device gets the same traffic from half of the producers.
TEST(TaskQueueStressTest, ProducersOnSharedAndSeparateStreamsMatchGold) {
  constexpr int kProducers = 4;
  const int kTasks = scaled(4000);
  const NPUStream shared0 = c10_npu::getStreamFromPool(false, 0);
  const NPUStream shared1 = c10_npu::getStreamFromPool(true, 1);

  struct PerProducer {
    int nextOnShared0 = 0;  // touched only by tasks of shared0
    int nextOnShared1 = 0;  // touched only by tasks of shared1
    int64_t ownSum = 0;     // touched only by tasks of the producer's own stream
    bool orderOk = true;    // written by tasks of shared0/shared1 only on failure
  };
  std::vector<PerProducer> state(kProducers);
  int64_t sharedTotal0 = 0;  // touched only by tasks of shared0
  std::vector<NPUStream> own;
  for (int p = 0; p < kProducers; ++p) own.push_back(c10_npu::getStreamFromPool(false, p % 2));
  // Own streams are distinct from each other and from the shared ones
  // (a pool hands out 32 streams round robin).
  for (int p = 0; p < kProducers; ++p) {
    ASSERT_NE(own[p], shared0);
    ASSERT_NE(own[p], shared1);
  }

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      PerProducer* mine = &state[p];
      int64_t* total0 = &sharedTotal0;
      for (int i = 0; i < kTasks; ++i) {
        launch(shared0, [mine, total0, i] {
          if (mine->nextOnShared0 != i) mine->orderOk = false;
          mine->nextOnShared0 = i + 1;
          *total0 += i;
        });
        launch(own[p], [mine, i, p] { mine->ownSum += static_cast<int64_t>(i) * (p + 1); });
        if (p % 2 == 1) {
          launch(shared1, [mine, i] {
            if (mine->nextOnShared1 != i) mine->orderOk = false;
            mine->nextOnShared1 = i + 1;
          });
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  shared0.synchronize();
  shared1.synchronize();
  for (const auto& s : own) s.synchronize();

  const int64_t gold = static_cast<int64_t>(kTasks) * (kTasks - 1) / 2;
  EXPECT_EQ(sharedTotal0, gold * kProducers);
  for (int p = 0; p < kProducers; ++p) {
    EXPECT_TRUE(state[p].orderOk) << "producer " << p << " ran out of launch order";
    EXPECT_EQ(state[p].nextOnShared0, kTasks) << "producer " << p;
    EXPECT_EQ(state[p].nextOnShared1, p % 2 == 1 ? kTasks : 0) << "producer " << p;
    EXPECT_EQ(state[p].ownSum, gold * (p + 1)) << "producer " << p;
  }
}

// Drains from other threads while producers push: after queue::drain(s)
// returns, every launch that had returned before the drain began has reached
// the runtime, so a runtime-level synchronize (no drain of its own) sees it
// done. The same for drainDevice / waitSubmitted / waitSubmittedDevice.
TEST(TaskQueueStressTest, DrainsFromOtherThreadsCoverEarlierLaunches) {
  constexpr int kProducers = 3;
  const int kTasks = scaled(3000);
  const NPUStream s = c10_npu::getStreamFromPool(false, 0);
  std::atomic<int64_t> launched{0};  // launches that returned
  std::atomic<int64_t> done{0};      // tasks that ran
  std::atomic<int> producersLeft{kProducers};
  std::atomic<bool> drainFailed{false};

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTasks; ++i) {
        launch(s, [&done] { done.fetch_add(1, std::memory_order_relaxed); });
        launched.fetch_add(1, std::memory_order_release);
      }
      producersLeft.fetch_sub(1);
    });
  }
  for (int d = 0; d < 2; ++d) {
    threads.emplace_back([&, d] {
      int round = 0;
      while (producersLeft.load() > 0) {
        const int64_t before = launched.load(std::memory_order_acquire);
        switch ((round++ + d) % 4) {
          case 0: c10_npu::queue::drain(s); break;
          case 1: c10_npu::queue::drainDevice(0); break;
          case 2: c10_npu::queue::waitSubmitted(s); break;
          default: c10_npu::queue::waitSubmittedDevice(0); break;
        }
        if (npuStreamSynchronize(s.rawHandle()) != npuSuccess) drainFailed = true;
        if (done.load() < before) drainFailed = true;
        (void)c10_npu::queue::hasPending(s);
      }
    });
  }
  for (auto& t : threads) t.join();
  s.synchronize();
  EXPECT_FALSE(drainFailed.load()) << "a drain returned before earlier launches were submitted";
  EXPECT_EQ(done.load(), static_cast<int64_t>(kProducers) * kTasks);
  EXPECT_FALSE(c10_npu::queue::hasPending(s));
}

// Event records and waits through the queue, from several threads at once:
// each thread owns a producer/consumer pair of streams (the pairs of odd
// threads cross devices) and, per round, writes a slot on the producer,
// records an event, makes the consumer wait on it and copies the slot there.
// The slots are plain ints: only the event orders the write before the read.
TEST(TaskQueueStressTest, EventRecordWaitOrdersAcrossStreamsFromManyThreads) {
  constexpr int kThreads = 4;
  const int kRounds = scaled(300);
  std::vector<std::thread> threads;
  std::vector<std::vector<int>> produced(kThreads, std::vector<int>(kRounds, -1));
  std::vector<std::vector<int>> consumed(kThreads, std::vector<int>(kRounds, -1));
  std::vector<NPUStream> producers, consumers;
  for (int t = 0; t < kThreads; ++t) {
    producers.push_back(c10_npu::getStreamFromPool(false, 0));
    consumers.push_back(c10_npu::getStreamFromPool(t % 2 == 0, t % 2));
  }
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int* in = produced[t].data();
      int* out = consumed[t].data();
      for (int r = 0; r < kRounds; ++r) {
        // A slow producer now and then, so that waits really park.
        launch(producers[t], [in, r] {
          if (r % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          in[r] = r * 7 + 1;
        });
        c10_npu::NPUEvent e;
        e.record(producers[t]);
        e.block(consumers[t]);
        launch(consumers[t], [in, out, r] { out[r] = in[r]; });
        // e is destroyed here with its record and wait possibly still queued:
        // queue::destroyEvent defers the runtime destroy until they are
        // submitted.
      }
      consumers[t].synchronize();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    producers[t].synchronize();
    for (int r = 0; r < kRounds; ++r) {
      ASSERT_EQ(consumed[t][r], r * 7 + 1) << "thread " << t << " round " << r;
    }
  }
}

// Launches on a sync-launch stream bypass the queue; mixing them with queued
// launches on other streams from several threads, and the host waiting on an
// event recorded behind queued work.
TEST(TaskQueueStressTest, EventSynchronizeFromAnotherThreadSeesQueuedWork) {
  const int kRounds = scaled(200);
  const NPUStream s = c10_npu::getStreamFromPool(false, 1);
  const NPUStream sync = c10_npu::getNPUStreamFromSyncLaunchPool(1);
  std::vector<int> values(kRounds, 0);
  std::vector<int> syncValues(kRounds, 0);
  for (int r = 0; r < kRounds; ++r) {
    int* slot = &values[r];
    int* syncSlot = &syncValues[r];
    launch(s, [slot, r] { *slot = r + 1; });
    launch(sync, [syncSlot, r] { *syncSlot = r + 2; });
    auto e = std::make_shared<c10_npu::NPUEvent>();
    e->record(s);
    int seen = 0;
    std::thread waiter([&, e] {
      e->synchronize();  // drains the queue of s, then waits for the record
      seen = *slot;
    });
    waiter.join();
    ASSERT_EQ(seen, r + 1) << "round " << r;
  }
  sync.synchronize();
  for (int r = 0; r < kRounds; ++r) ASSERT_EQ(syncValues[r], r + 2) << "round " << r;
}

}  // namespace
