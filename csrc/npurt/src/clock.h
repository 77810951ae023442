// The runtime's monotonic clock (npuGetTimestampNs, event timestamps, traces).
//
// Thread safety: thread-safe (steady_clock is).
#pragma once

#include <chrono>
#include <cstdint>

namespace npurt::internal {

inline uint64_t nowNs() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Spin-wait hint: lets the sibling hyper-thread (or the hypervisor) run while
// an executor spins for work.
inline void cpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace npurt::internal
