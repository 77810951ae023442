// See utilization.h and Note [Device utilization].
#include "utilization.h"

#include <algorithm>

namespace npurt::internal {

UtilizationMeter::UtilizationMeter(int workers) {
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>());
}

void UtilizationMeter::beginBusy(int w, uint64_t nowNs) noexcept {
  // A start of 0 means "not busy"; the clock never reads 0 in practice.
  workers_[static_cast<size_t>(w)]->spanStartNs.store(std::max<uint64_t>(nowNs, 1),
                                                      std::memory_order_relaxed);
}

void UtilizationMeter::endBusy(int w, uint64_t nowNs) noexcept {
  Worker& worker = *workers_[static_cast<size_t>(w)];
  const uint64_t start = worker.spanStartNs.load(std::memory_order_relaxed);
  if (start == 0) return;
  add(worker, start, std::max(start, nowNs));
  worker.spanStartNs.store(0, std::memory_order_relaxed);
}

void UtilizationMeter::add(Worker& worker, uint64_t fromNs, uint64_t toNs) noexcept {
  // Only the last kBuckets buckets can be read: skip what is older.
  const uint64_t oldest = toNs / kBucketNs >= kBuckets ? (toNs / kBucketNs - kBuckets + 1) : 0;
  fromNs = std::max(fromNs, oldest * kBucketNs);
  while (fromNs < toNs) {
    const uint64_t index = fromNs / kBucketNs;
    const uint64_t end = std::min(toNs, (index + 1) * kBucketNs);
    Bucket& b = worker.buckets[index % kBuckets];
    if (b.epoch.load(std::memory_order_relaxed) != index + 1) {
      b.busyNs.store(0, std::memory_order_relaxed);
      b.epoch.store(index + 1, std::memory_order_relaxed);
    }
    b.busyNs.store(b.busyNs.load(std::memory_order_relaxed) + (end - fromNs),
                   std::memory_order_relaxed);
    fromNs = end;
  }
}

uint64_t UtilizationMeter::recorded(const Worker& worker, uint64_t fromNs, uint64_t toNs) noexcept {
  uint64_t busy = 0;
  for (const Bucket& b : worker.buckets) {
    const uint64_t epoch = b.epoch.load(std::memory_order_relaxed);
    if (epoch == 0) continue;
    const uint64_t index = epoch - 1;
    // Whole buckets only: the window starts at a bucket boundary.
    if (index * kBucketNs >= fromNs && index * kBucketNs < toNs) {
      busy += b.busyNs.load(std::memory_order_relaxed);
    }
  }
  return busy;
}

unsigned UtilizationMeter::percent(uint64_t nowNs) const noexcept {
  if (workers_.empty()) return 0;
  // The window: the current bucket and the kBuckets - 1 before it.
  const uint64_t current = nowNs / kBucketNs;
  const uint64_t fromNs = (current >= kBuckets - 1 ? current - (kBuckets - 1) : 0) * kBucketNs;
  const uint64_t windowNs = std::max<uint64_t>(nowNs - fromNs, 1);
  uint64_t busy = 0;
  for (const auto& worker : workers_) {
    uint64_t workerBusy = recorded(*worker, fromNs, nowNs + 1);
    const uint64_t start = worker->spanStartNs.load(std::memory_order_relaxed);
    if (start != 0 && start < nowNs) workerBusy += nowNs - std::max(start, fromNs);
    busy += std::min(workerBusy, windowNs);  // a span read while it is being added
  }
  const uint64_t total = windowNs * workers_.size();
  return static_cast<unsigned>(std::min<uint64_t>(100, (busy * 100 + total / 2) / total));
}

}  // namespace npurt::internal
