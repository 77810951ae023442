// A device's utilization: the share of its executor cores' time spent
// running work over the last second (npuDeviceGetUtilization).
//
// Note [Device utilization]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Ascend reports how busy the AI cores were (aclrtGetDeviceUtilizationRate:
// cube and vector utilization); the simulated device's cores are its executor
// threads, so its utilization is the time they spent running a stream's tasks
// (a task's simulated delay included), summed over the cores, divided by
// cores × the window, over the last second. One stream kept busy on a
// two-core device is 50 %; a core that lingers on a drained stream waiting
// for more (Note [Consumer distance] in executor.h) or sleeps is idle.
//
// Cost: each worker meters busy *spans*, not tasks: a span starts when it
// takes a stream or finds new work after a linger, and ends when it starts to
// linger or gives the stream up, so a stream of back-to-back tasks costs
// nothing per task. Spans are added to per-worker 100 ms buckets that only
// that worker writes (relaxed atomics, so a reader on another thread sees a
// value that is at most one span old: utilization is a statistic).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace npurt::internal {

class UtilizationMeter {
 public:
  static constexpr uint64_t kBucketNs = 100'000'000;  // 100 ms
  static constexpr size_t kBuckets = 10;              // a window of one second

  explicit UtilizationMeter(int workers);
  UtilizationMeter(const UtilizationMeter&) = delete;
  UtilizationMeter& operator=(const UtilizationMeter&) = delete;

  // Worker `w` started (beginBusy) or stopped (endBusy) running work at
  // nowNs. Called by that worker only; endBusy without a span is a no-op.
  void beginBusy(int w, uint64_t nowNs) noexcept;
  void endBusy(int w, uint64_t nowNs) noexcept;

  // Percent (0-100) of the workers' time spent busy over the last second,
  // ongoing spans included. Thread-safe.
  unsigned percent(uint64_t nowNs) const noexcept;

 private:
  struct Bucket {
    std::atomic<uint64_t> epoch{0};   // which 100 ms (nowNs / kBucketNs), +1 (0 = never)
    std::atomic<uint64_t> busyNs{0};  // busy time of this worker in it
  };
  struct Worker {
    std::atomic<uint64_t> spanStartNs{0};  // 0: not busy
    std::array<Bucket, kBuckets> buckets;
  };

  void add(Worker& worker, uint64_t fromNs, uint64_t toNs) noexcept;
  // Busy time of `worker` in [fromNs, toNs), finished spans only.
  static uint64_t recorded(const Worker& worker, uint64_t fromNs, uint64_t toNs) noexcept;

  std::vector<std::unique_ptr<Worker>> workers_;  // each on its own allocation
};

}  // namespace npurt::internal
