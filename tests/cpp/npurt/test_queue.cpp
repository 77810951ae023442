// Covers a stream's task ring (Note [Task ring], Note [Ring entries] and
// Note [Task descriptors] in csrc/npurt/src): every kind of task keeps its
// fields and its place in the stream whatever number of ring entries it
// takes, across the ring's wrap-around, its overflow list and its growth,
// with the trace on (one more entry per task) and off, and for user tasks
// beyond the descriptor table's capacity.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

// What the tasks of one test record. Tasks of one stream run one at a time,
// so `order` needs no lock.
struct QueueLog {
  std::vector<int> order;        // the index of every task that ran
  std::atomic<int> released{0};  // user-task releases
};
QueueLog* gLog = nullptr;

void hostTask(void* user) {
  gLog->order.push_back(static_cast<int>(reinterpret_cast<intptr_t>(user)));
}

int userRun(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  gLog->order.push_back(static_cast<int>(reinterpret_cast<intptr_t>(user)));
  return 0;
}
void userRelease(void* /*user*/) { gLog->released.fetch_add(1, std::memory_order_relaxed); }
// A second run function, so that two triples differ by run alone.
int otherUserRun(void* user, char* errorBuf, size_t errorBufSize) {
  return userRun(user, errorBuf, errorBufSize);
}

void* asUser(int i) { return reinterpret_cast<void*>(static_cast<intptr_t>(i)); }

class QueueTest : public NpurtTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    NpurtTest::SetUp();
    gLog = &log_;
    if (GetParam()) {
      ASSERT_NPU_OK(npuTraceStart());  // every task takes one entry more
    }
  }
  void TearDown() override {
    if (GetParam()) {
      EXPECT_NPU_OK(npuTraceStop());
    }
    NpurtTest::TearDown();
    gLog = nullptr;
  }

  // Enqueues task i as one of five kinds, which take 1 to 3 ring entries:
  // host function, user task (interned), user task with a second run
  // function, user task with a copied name (a node), and an event record
  // between two host functions.
  void launchOfKind(npuStream_t s, int i, std::vector<npurt::EventHandle>& events) {
    static const char* const kName = "queue_user";
    switch (i % 5) {
      case 0:
        ASSERT_NPU_OK(npuLaunchHostFunc(s, &hostTask, asUser(i)));
        break;
      case 1: {
        const npuTask task{kName, &userRun, &userRelease, asUser(i), 0u};
        ASSERT_NPU_OK(npuLaunchTask(s, &task));
        break;
      }
      case 2: {
        const npuTask task{kName, &otherUserRun, nullptr, asUser(i), 0u};
        ASSERT_NPU_OK(npuLaunchTask(s, &task));
        break;
      }
      case 3: {
        const npuTask task{kName, &userRun, &userRelease, asUser(i), npuTaskCopyName};
        ASSERT_NPU_OK(npuLaunchTask(s, &task));
        break;
      }
      default:
        events.push_back(makeEvent());
        ASSERT_NPU_OK(npuEventRecord(events.back().get(), s));
        ASSERT_NPU_OK(npuLaunchHostFunc(s, &hostTask, asUser(i)));
        break;
    }
  }

  // Every task ran exactly once, in launch order, and released its data.
  void expectRanInOrder(int tasks) {
    ASSERT_EQ(log_.order.size(), static_cast<size_t>(tasks));
    for (int i = 0; i < tasks; ++i)
      ASSERT_EQ(log_.order[static_cast<size_t>(i)], i) << "task " << i;
    int releasing = 0;
    for (int i = 0; i < tasks; ++i) releasing += (i % 5 == 1 || i % 5 == 3);
    EXPECT_EQ(log_.released.load(), releasing);
  }

  QueueLog log_;
};

// Far more entries than the first ring holds, enqueued while the stream is
// blocked: the ring fills, the rest goes to the overflow list, and the ring
// grows; then everything runs in order.
TEST_P(QueueTest, MixedTasksBehindABlockedStreamRunInOrder) {
  constexpr int kTasks = 6'000;
  auto s = makeStream();
  std::vector<npurt::EventHandle> events;
  for (int round = 0; round < 2; ++round) {  // the second round uses the grown ring
    log_.order.clear();
    log_.released = 0;
    events.clear();
    ScopedGate gate;
    ASSERT_NPU_OK(gate.launchBlocker(s.get()));
    for (int i = 0; i < kTasks; ++i) launchOfKind(s.get(), i, events);
    EXPECT_NPU(npuErrorNotReady, npuStreamQuery(s.get()));
    for (const auto& e : events) EXPECT_NPU(npuErrorNotReady, npuEventQuery(e.get()));
    gate.open();
    ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
    expectRanInOrder(kTasks);
    for (const auto& e : events) EXPECT_NPU_OK(npuEventQuery(e.get()));
  }
}

// Tasks that take 1, 2 or 3 entries go through the ring (never the overflow
// list: each chunk fits the first ring) while it is drained, so that tasks
// straddle its end again and again.
TEST_P(QueueTest, MixedTasksStreamingThroughTheRingRunInOrder) {
  constexpr int kTasks = 20'000;
  constexpr int kChunk = 100;  // at most 3 entries a task (and 2 tasks for kind 4)
  auto s = makeStream();
  std::vector<npurt::EventHandle> events;
  for (int i = 0; i < kTasks; ++i) {
    launchOfKind(s.get(), i, events);
    if (i % kChunk == kChunk - 1) {
      ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    }
  }
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  expectRanInOrder(kTasks);
  for (const auto& e : events) EXPECT_NPU_OK(npuEventQuery(e.get()));
}

// Log of the mixed-span stress test: (producer << 32) | sequence of every
// task that ran, in order (one task of a stream runs at a time).
std::vector<uint64_t> gMixedLog;
std::atomic<int> gMixedReleased{0};

uint64_t unpack(void* user) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(user)); }
void* pack(uint64_t producer, uint64_t seq) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(producer << 32 | seq));
}
void mixedHost(void* user) { gMixedLog.push_back(unpack(user)); }
int mixedRun(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  gMixedLog.push_back(unpack(user));
  return 0;
}
void mixedRelease(void* /*user*/) { gMixedReleased.fetch_add(1, std::memory_order_relaxed); }

// Many producers enqueue, onto one stream, tasks of one and two entries
// (three with the trace on): host functions, a user task that was interned,
// and one that was not because the descriptor table is full. Tickets of
// different sizes interleave in the ring under contention; every task must
// run exactly once, each producer's in its order.
TEST_P(QueueTest, MixedSpansFromManyProducersKeepEachProducersOrder) {
  constexpr int kProducers = 8;
  const int perProducer = std::max(500, static_cast<int>(30'000 * stressScale()));
  static const char* const kInterned = "mixed_interned";
  static const char* const kNotInterned = "mixed_not_interned";
  auto s = makeStream();
  // Intern one triple, then fill the table with others, so that the next
  // new triple cannot be interned.
  const npuTask first{kInterned, &mixedRun, &mixedRelease, pack(0, 0), 0u};
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &first));
  static std::vector<std::string> fillers;
  for (int i = static_cast<int>(fillers.size()); i < 4'100; ++i) {
    fillers.push_back("filler_" + std::to_string(i));
  }
  for (const std::string& name : fillers) {
    const npuTask task{name.c_str(), &mixedRun, &mixedRelease, pack(0, 0), 0u};
    ASSERT_NPU_OK(npuLaunchTask(s.get(), &task));
  }
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  gMixedLog.clear();
  gMixedLog.reserve(static_cast<size_t>(kProducers) * perProducer);
  gMixedReleased = 0;

  std::atomic<int> failures{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < perProducer; ++i) {
        void* user = pack(static_cast<uint64_t>(p), static_cast<uint64_t>(i));
        npuError_t status = npuSuccess;
        switch ((i + p) % 3) {
          case 0:
            status = npuLaunchHostFunc(s.get(), &mixedHost, user);
            break;
          case 1: {
            const npuTask task{kInterned, &mixedRun, &mixedRelease, user, 0u};
            status = npuLaunchTask(s.get(), &task);
            break;
          }
          default: {
            const npuTask task{kNotInterned, &mixedRun, &mixedRelease, user, 0u};
            status = npuLaunchTask(s.get(), &task);
            break;
          }
        }
        if (status != npuSuccess) failures.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& t : producers) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));

  ASSERT_EQ(gMixedLog.size(), static_cast<size_t>(kProducers) * perProducer);
  std::vector<uint64_t> next(kProducers, 0);
  for (uint64_t entry : gMixedLog) {
    const auto producer = static_cast<size_t>(entry >> 32);
    ASSERT_LT(producer, next.size());
    ASSERT_EQ(entry & 0xFFFFFFFFu, next[producer]) << "producer " << producer << " out of order";
    ++next[producer];
  }
  int releasing = 0;
  for (int p = 0; p < kProducers; ++p) {
    for (int i = 0; i < perProducer; ++i) releasing += ((i + p) % 3 != 0);
  }
  EXPECT_EQ(gMixedReleased.load(), releasing);
}

INSTANTIATE_TEST_SUITE_P(Trace, QueueTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& traceOn) {
                           return traceOn.param ? "TraceOn" : "TraceOff";
                         });

// More distinct (name, run, release) triples than the descriptor table holds:
// the tasks past it are encoded in full, and every task still runs with its
// own name (seen in the trace) and its own data, in order.
TEST_F(NpurtTest, UserTasksBeyondTheDescriptorTableKeepTheirNames) {
  constexpr int kNames = 5'000;  // > TaskDescriptors::kCapacity (4096)
  // The names outlive every task (the npuLaunchTask contract for names that
  // are not copied).
  static std::vector<std::string> names;
  names.clear();
  for (int i = 0; i < kNames; ++i) names.push_back("distinct_" + std::to_string(i));
  QueueLog log;
  gLog = &log;
  ASSERT_NPU_OK(npuTraceStart());
  auto s = makeStream();
  constexpr int kChunk = 100;  // fits the first ring: the tasks go through the ring
  for (int i = 0; i < kNames; ++i) {
    const npuTask task{names[static_cast<size_t>(i)].c_str(), &userRun, &userRelease, asUser(i),
                       0u};
    ASSERT_NPU_OK(npuLaunchTask(s.get(), &task));
    if (i % kChunk == kChunk - 1) {
      ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    }
  }
  ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  ASSERT_NPU_OK(npuTraceStop());
  gLog = nullptr;
  ASSERT_EQ(log.order.size(), static_cast<size_t>(kNames));
  for (int i = 0; i < kNames; ++i) ASSERT_EQ(log.order[static_cast<size_t>(i)], i);
  EXPECT_EQ(log.released.load(), kNames);

  const std::string path = tempPath(".trace.json");
  ASSERT_NPU_OK(npuTraceWrite(path.c_str()));
  std::string error;
  const std::optional<Json> doc = parseJson(readFile(path), &error);
  unlink(path.c_str());
  ASSERT_TRUE(doc.has_value()) << error;
  std::vector<std::pair<double, std::string>> ran;  // (start, name) of every task
  for (const Json& e : doc->at("traceEvents").array) {
    if (!e.has("ph") || e.at("ph").string != "X") continue;
    ran.emplace_back(e.at("ts").number, e.at("name").string);
    // The enqueue time travels in an entry of its own: it must be the
    // task's, i.e. before the task started.
    ASSERT_TRUE(e.at("args").has("enqueue_us"));
    EXPECT_LE(e.at("args").at("enqueue_us").number, e.at("ts").number);
  }
  std::stable_sort(ran.begin(), ran.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_EQ(ran.size(), static_cast<size_t>(kNames));
  for (int i = 0; i < kNames; ++i) {
    ASSERT_EQ(ran[static_cast<size_t>(i)].second, names[static_cast<size_t>(i)]) << "task " << i;
  }
}

}  // namespace
}  // namespace npurt_test
