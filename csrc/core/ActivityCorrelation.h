// Correlation of device activities with the host operations that queued
// them, for the profiler (csrc/profiler).
//
// Layer: framework core.
//
// Note [Correlation through the task queue]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A profiler pushes a correlation id on the thread that runs an operator
// (Kineto: IActivityProfilerSession::pushCorrelationId) and expects the
// device activities the operator caused to carry it. npurt reads the id of
// the thread that enqueues a task (Note [Activity correlation] in
// npurt_activity.h), but with the task queue that thread is the queue's
// consumer, not the operator's. So while a profiler collects, the task queue
// reads the calling thread's id when an item is pushed (currentId()) and the
// consumer pushes it into npurt around the item's submission
// (ExternalIdScope). When no profiler collects, a push costs one relaxed
// load (collecting()) and nothing else.
#pragma once

#include <atomic>
#include <cstdint>

namespace c10_npu::profiler {

namespace detail {
extern std::atomic<bool> gCollecting;
}  // namespace detail

// True while a profiler session collects device activities. Hot path: one
// relaxed load (no data hangs off the flag; ids are read per thread).
// Thread-safe.
inline bool collecting() noexcept { return detail::gCollecting.load(std::memory_order_relaxed); }
// Turned on and off by the profiler session. Thread-safe.
void setCollecting(bool on) noexcept;

// The calling thread's correlation ids, innermost last; ids are 32-bit as
// Kineto's are. currentId() is 0 when none is pushed. Thread-local.
void pushId(uint32_t id);
void popId() noexcept;
uint32_t currentId() noexcept;

// Pushes `id` as npurt's external correlation id of this thread for the
// scope's lifetime (nothing for 0). For the task queue's consumer, which
// enqueues on behalf of other threads. Never throws.
class ExternalIdScope {
 public:
  explicit ExternalIdScope(uint32_t id) noexcept;
  ~ExternalIdScope();
  ExternalIdScope(const ExternalIdScope&) = delete;
  ExternalIdScope& operator=(const ExternalIdScope&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace c10_npu::profiler
