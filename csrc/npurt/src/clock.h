// The runtime's monotonic clock (npuGetTimestampNs, event timestamps, traces).
//
// Thread safety: thread-safe (steady_clock is).
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace npurt::internal {

inline uint64_t nowNs() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Asks for the cache line at `p` in exclusive state, ahead of a store to it.
// __builtin_prefetch(p, 1) emits a plain read prefetch unless the compiler
// targets PRFCHW, so x86 spells the instruction out (on the rare x86 CPU
// without it the encoding is a no-op).
inline void prefetchForWrite(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// Spins (pause instructions) for about `ns` nanoseconds, keeping the CPU: for
// a worker that expects work within microseconds and must react at once.
// The length of a pause differs by an order of magnitude between CPUs, so
// the spin is measured on the clock, not in pauses.
inline void spinFor(uint64_t ns) noexcept {
  const uint64_t end = nowNs() + ns;
  do {
    for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield" ::: "memory");
#endif
    }
  } while (nowNs() < end);
}

// How long a host thread that waits for the device polls before it sleeps
// (Note [Spin before blocking] in csrc/npurt/README.md).
inline constexpr uint64_t kSpinBeforeBlockNs = 20'000;

// Polls `ready` for up to `ns` nanoseconds, pausing between looks; returns
// whether it became true. For a host thread about to block on something that
// is likely to happen within microseconds.
template <typename Ready>
bool spinUntil(Ready&& ready, uint64_t ns) noexcept(noexcept(ready())) {
  if (ready()) return true;
  const uint64_t end = nowNs() + ns;
  do {
    spinFor(100);
    if (ready()) return true;
  } while (nowNs() < end);
  return false;
}

// Waits about `ns` nanoseconds without sleeping, yielding the CPU meanwhile:
// on an oversubscribed machine a worker that waits for producers to get
// ahead must not keep them off the core they need. (When nothing else is
// runnable, yield returns at once and this is a spin.) For waits far shorter
// than a time slice.
inline void yieldFor(uint64_t ns) noexcept {
  const uint64_t end = nowNs() + ns;
  do {
    std::this_thread::yield();
  } while (nowNs() < end);
}

}  // namespace npurt::internal
