// Fault injection, a test hook: see Note [Fault injection] in
// csrc/npurt/README.md (npuSetFaultInjection, NPU_SIM_FAULT).
//
// One countdown per kind, process-wide. Disarmed (0), a check costs one
// relaxed load; armed with n, the n-th check of that kind fires, once, and
// disarms the kind. The four countdowns share one line: they are read on hot
// paths by every thread and written only when a test arms them.
//
// Thread safety: every function is thread-safe (atomic countdowns).
#pragma once

#include <atomic>
#include <cstdint>

namespace npurt::internal {

// Indices of the countdowns; the same values as npuFaultKind (checked in
// api_debug.cpp).
enum class FaultKind : int { kLaunch = 0, kTask = 1, kCopy = 2, kAlloc = 3 };
inline constexpr int kFaultKinds = 4;

// The message an injected fault fails with.
inline constexpr const char* kInjectedFault = "injected fault";

class FaultInjector {
 public:
  // Hot path: one relaxed load when the kind is disarmed. True for the call
  // that fires the fault.
  bool fires(FaultKind kind) noexcept {
    std::atomic<uint64_t>& countdown = countdown_[static_cast<int>(kind)];
    if (countdown.load(std::memory_order_relaxed) == 0) [[likely]]
      return false;
    return countDown(countdown);
  }

  // nth = 1: the next check of `kind` fires; 0 disarms.
  void arm(FaultKind kind, uint64_t nth) noexcept {
    countdown_[static_cast<int>(kind)].store(nth, std::memory_order_relaxed);
  }

 private:
  static bool countDown(std::atomic<uint64_t>& countdown) noexcept;

  // relaxed everywhere: only the count matters, nothing is published with it.
  std::atomic<uint64_t> countdown_[kFaultKinds] = {};
};

// The process's injector (constant-initialised: usable at any time, from
// any static initialiser or destructor).
inline constinit FaultInjector gFaultInjector;
inline FaultInjector& faults() noexcept { return gFaultInjector; }

}  // namespace npurt::internal
