// Enqueue cost of an empty task, npurt against the baseline stream, with 1 and
// 4 producer threads sharing one stream.
//
// What one benchmark iteration is: every producer enqueues its share of
// kTasksPerBatch empty tasks (the timed part, reported through manual time),
// then the benchmark thread drains the stream (timed separately). So:
//  - enq_ns_per_task   = wall time of the enqueue phase (earliest producer
//                        start to latest producer end) / tasks enqueued. With 4
//                        producers this is the aggregate cost, 1 / throughput,
//                        as Google Benchmark's ->Threads(n) reports it.
//  - drain_ns_per_task = time of the synchronize that follows the enqueue
//                        phase (the tasks the worker has not run yet) / tasks.
//  - e2e_ns_per_task   = both together: enqueue-to-all-done cost per task.
// Steady state: the stream and its worker(s) exist and have run a warm-up
// batch before timing starts, so thread start-up and first-use allocation are
// excluded; within a batch the worker drains concurrently with the producers,
// which is the contention a real producer meets. The one wake-up of the idle
// worker per batch is amortised over kTasksPerBatch tasks. Both npurt and the
// baseline run in exactly this harness.
//
// Placement. With one producer each benchmark also runs "pinned": the
// producer on one CPU and the stream's consumer (npurt's executor threads,
// the baseline's worker) on another, so that the consumer really drains
// while the producer enqueues. Left to the scheduler, the two sometimes share
// a CPU for a whole batch; the consumer then does not run until the producer
// is done, and the enqueue figure is that of a queue without a consumer (for
// the baseline 10-20 ns a task instead of 60-100). The targets are read from
// the pinned rows with one producer and from the unpinned rows with four.
// npurt's pinned streams live on device 1, whose executor threads are started
// on the consumer's CPU before any benchmark runs (threads inherit their
// creator's affinity); everything else uses device 0.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "baseline_stream.h"
#include "bench_common.h"
#include "npurt/npurt.hpp"

namespace npubench {
namespace {

// Tasks per batch, split evenly between the producers. Large enough that the
// per-batch costs (waking the producers and the idle worker) are noise.
constexpr int kTasksPerBatch = 16384;

// The two CPUs of the pinned placement (see the file comment), or -1 when
// the process may run on fewer than two CPUs or npurt has a single device.
struct Placement {
  int producerCpu = -1;
  int consumerCpu = -1;
  bool available() const { return consumerCpu >= 0; }
};
Placement gPlacement;
constexpr int kPinnedDevice = 1;

// Pins the calling thread to one CPU for its lifetime (cpu < 0: does
// nothing), restoring the previous affinity afterwards.
class ScopedAffinity {
 public:
  explicit ScopedAffinity(int cpu) {
    if (cpu < 0) return;
    pinned_ = pthread_getaffinity_np(pthread_self(), sizeof previous_, &previous_) == 0 &&
              pinCurrentThread(cpu);
  }
  ScopedAffinity(const ScopedAffinity&) = delete;
  ScopedAffinity& operator=(const ScopedAffinity&) = delete;
  ~ScopedAffinity() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof previous_, &previous_);
  }

  static bool pinCurrentThread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
  }

 private:
  cpu_set_t previous_{};
  bool pinned_ = false;
};

// Producer threads started once per benchmark run and released once per batch.
// A mutex/condvar gate rather than std::barrier: on this 2-core machine a
// spinning waiter would steal the core the stream's worker needs.
class ProducerPool {
 public:
  // body(index) enqueues one producer's share; returns false on failure.
  // With cpu >= 0 every producer runs pinned to that CPU.
  ProducerPool(int producers, int cpu, std::function<bool(int)> body)
      : body_(std::move(body)), start_(producers), end_(producers) {
    threads_.reserve(producers);
    for (int i = 0; i < producers; ++i) {
      threads_.emplace_back([this, i, cpu] {
        if (cpu >= 0) ScopedAffinity::pinCurrentThread(cpu);
        loop(i);
      });
    }
  }
  ProducerPool(const ProducerPool&) = delete;
  ProducerPool& operator=(const ProducerPool&) = delete;
  ~ProducerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Runs body on every producer once. Returns the wall time in ns from the
  // earliest producer start to the latest producer end, or -1 if a body
  // failed.
  int64_t runBatch() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_ = 0;
    failed_ = false;
    ++generation_;
    start_cv_.notify_all();
    done_cv_.wait(lock, [this] { return done_ == static_cast<int>(threads_.size()); });
    if (failed_) return -1;
    Clock::time_point first = start_[0];
    Clock::time_point last = end_[0];
    for (size_t i = 1; i < threads_.size(); ++i) {
      first = std::min(first, start_[i]);
      last = std::max(last, end_[i]);
    }
    return std::chrono::duration_cast<std::chrono::nanoseconds>(last - first).count();
  }

 private:
  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      // Timestamps are taken by the producer itself so that the gate's
      // wake-up latency is not counted as enqueue time.
      const Clock::time_point start = Clock::now();
      const bool succeeded = body_(index);
      const Clock::time_point end = Clock::now();
      std::lock_guard<std::mutex> lock(mutex_);
      start_[index] = start;
      end_[index] = end;
      failed_ = failed_ || !succeeded;
      if (++done_ == static_cast<int>(threads_.size())) done_cv_.notify_one();
    }
  }

  std::function<bool(int)> body_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped once per batch
  int done_ = 0;             // producers finished with the current batch
  bool failed_ = false;
  bool stop_ = false;
  std::vector<Clock::time_point> start_;
  std::vector<Clock::time_point> end_;
  std::vector<std::thread> threads_;
};

void emptyHostFn(void* /*userData*/) {}
int emptyRun(void* /*userData*/, char* /*errorBuf*/, size_t /*errorBufSize*/) { return 0; }

// Targets: how to create a stream, enqueue one empty task and drain.
struct NpurtLaunch {
  static bool enqueue(npuStream_t s) {
    return npurt::launch(s, "empty", [] {}) == npuSuccess;
  }
};
struct NpurtHostFunc {
  static bool enqueue(npuStream_t s) {
    return npuLaunchHostFunc(s, &emptyHostFn, nullptr) == npuSuccess;
  }
};
// npuLaunchTask with a task that owns nothing: the floor of npurt's enqueue
// path, without npurt::launch's heap-allocated callable.
struct NpurtStaticTask {
  static bool enqueue(npuStream_t s) {
    static const npuTask kTask{"empty", &emptyRun, nullptr, nullptr, 0u};
    return npuLaunchTask(s, &kTask) == npuSuccess;
  }
};

bool pinned(const benchmark::State& state) { return state.range(1) != 0; }

// Shared measurement loop; see the file comment for what each counter holds.
// enqueue(producer) enqueues one task, drain() synchronizes the stream.
template <typename EnqueueFn, typename DrainFn>
void measure(benchmark::State& state, EnqueueFn enqueue, DrainFn drain) {
  const int producers = static_cast<int>(state.range(0));
  const int perProducer = kTasksPerBatch / producers;
  const int producerCpu = pinned(state) ? gPlacement.producerCpu : -1;
  ProducerPool pool(producers, producerCpu, [&](int) {
    for (int i = 0; i < perProducer; ++i) {
      if (!enqueue()) return false;
    }
    return true;
  });
  // Warm-up batch: starts executors, grows queues and allocator caches.
  if (pool.runBatch() < 0 || !drain()) {
    state.SkipWithError("warm-up batch failed");
    return;
  }
  int64_t enqueueNs = 0;
  int64_t drainNs = 0;
  for (auto _ : state) {
    const int64_t ns = pool.runBatch();
    const Clock::time_point drainStart = Clock::now();
    const bool drained = drain();
    drainNs += nsSince(drainStart);
    if (ns < 0 || !drained) {
      state.SkipWithError("enqueue or drain failed");
      break;
    }
    enqueueNs += ns;
    state.SetIterationTime(static_cast<double>(ns) * 1e-9);
  }
  const double tasks = static_cast<double>(state.iterations()) * perProducer * producers;
  if (tasks == 0) return;
  state.SetItemsProcessed(static_cast<int64_t>(tasks));
  state.counters[kEnqueueCounter] = static_cast<double>(enqueueNs) / tasks;
  state.counters["drain_ns_per_task"] = static_cast<double>(drainNs) / tasks;
  state.counters["e2e_ns_per_task"] = static_cast<double>(enqueueNs + drainNs) / tasks;
}

template <typename Target>
void BM_NpurtEnqueue(benchmark::State& state) {
  npuStream_t stream = nullptr;
  if (!ok(state, npuSetDevice(pinned(state) ? kPinnedDevice : 0)) ||
      !ok(state, npuStreamCreate(&stream)) || !ok(state, npuSetDevice(0))) {
    return;
  }
  npurt::StreamHandle owner(stream);
  measure(
      state, [stream] { return Target::enqueue(stream); },
      [stream] { return npuStreamSynchronize(stream) == npuSuccess; });
}

void BM_BaselineEnqueue(benchmark::State& state) {
  std::optional<ScopedAffinity> onConsumerCpu;
  if (pinned(state)) onConsumerCpu.emplace(gPlacement.consumerCpu);
  BaselineStream stream;  // its worker inherits the affinity
  onConsumerCpu.reset();
  measure(
      state,
      [&stream] {
        stream.enqueue([] {});
        return true;
      },
      [&stream] {
        stream.synchronize();
        return true;
      });
}

// Chooses the CPUs of the pinned placement and starts the pinned device's
// executor threads on the consumer's CPU. Leaves gPlacement unavailable if
// that cannot be done.
void preparePlacement() {
  cpu_set_t allowed;
  int deviceCount = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      npuGetDeviceCount(&deviceCount) != npuSuccess || deviceCount <= kPinnedDevice) {
    return;
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.size() < 2) return;
  ScopedAffinity onConsumerCpu(cpus[1]);
  npuStream_t stream = nullptr;
  if (npuSetDevice(kPinnedDevice) != npuSuccess || npuStreamCreate(&stream) != npuSuccess) {
    (void)npuSetDevice(0);
    return;
  }
  (void)npuStreamDestroy(stream);  // the executor threads stay
  (void)npuSetDevice(0);
  gPlacement = Placement{cpus[0], cpus[1]};
}

}  // namespace

void registerEnqueueBenchmarks() {
  preparePlacement();
  // Producer-count-major, the baseline first: the variants of one producer
  // count are registered next to each other (and run in random order with
  // --benchmark_enable_random_interleaving).
  for (int producers : {1, 4}) {
    for (int pinned : {0, 1}) {
      if (pinned == 1 && (producers != 1 || !gPlacement.available())) continue;
      const auto add = [producers, pinned](const char* name, void (*fn)(benchmark::State&)) {
        benchmark::RegisterBenchmark(name, fn)
            ->ArgNames({"producers", "pinned"})
            ->Args({producers, pinned})
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      };
      add(kEnqueueBaseline, &BM_BaselineEnqueue);
      add(kEnqueueLaunch, &BM_NpurtEnqueue<NpurtLaunch>);
      add(kEnqueueHostFunc, &BM_NpurtEnqueue<NpurtHostFunc>);
      add(kEnqueueTask, &BM_NpurtEnqueue<NpurtStaticTask>);
    }
  }
}

}  // namespace npubench
