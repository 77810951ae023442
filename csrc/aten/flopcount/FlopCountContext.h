// torch_npu's FLOP counter state (torch_npu.utils.FlopsCounter, bound as
// torch_npu._C._flops_count._FlopCountContext). Layer: ops.
//
// Note [Recorded and traversed FLOPs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While the counter is enabled, every counted op (FlopCounter.h) on npu adds
// its FLOPs to traversedCount, and also to recordedCount unless the counter
// is paused: pause()/resume() bracket work that should be seen but not
// charged (torch_npu's use: recomputation in activation checkpointing).
// Disabled, nothing is counted; reset() disables, resumes and zeroes both.
// Ops are counted on the thread that calls them, when they are queued, not
// when the device runs them, so the counts are final as soon as the calls
// returned (no synchronize needed), and an op that raised at the call is not
// counted.
#pragma once

#include <atomic>
#include <cstdint>

namespace c10_npu::aten {

class FlopCountContext {
 public:
  // The process's counter; constant-initialised, so usable at any time.
  // Thread-safe.
  static FlopCountContext& GetInstance() noexcept;

  // Thread-safe; see Note [Recorded and traversed FLOPs].
  void enable() noexcept;
  void disable() noexcept;
  void pause() noexcept { paused_.store(true, std::memory_order_relaxed); }
  void resume() noexcept { paused_.store(false, std::memory_order_relaxed); }
  void reset() noexcept;
  bool isEnabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  bool isPaused() const noexcept { return paused_.load(std::memory_order_relaxed); }

  // Adds one op's FLOPs (the counter need not be enabled: callers check).
  // Thread-safe: counts of ops from several threads add up.
  void record(int64_t flops) noexcept;

  // The counts so far. Thread-safe.
  int64_t recordedCount() const noexcept { return recorded_.load(std::memory_order_relaxed); }
  int64_t traversedCount() const noexcept { return traversed_.load(std::memory_order_relaxed); }

  constexpr FlopCountContext() noexcept = default;
  FlopCountContext(const FlopCountContext&) = delete;
  FlopCountContext& operator=(const FlopCountContext&) = delete;

 private:
  // Relaxed everywhere: the counts are sums read after the counted calls
  // returned on the reading thread, or approximate if read concurrently.
  std::atomic<bool> enabled_{false};
  std::atomic<bool> paused_{false};
  std::atomic<int64_t> recorded_{0};
  std::atomic<int64_t> traversed_{0};
};

}  // namespace c10_npu::aten
