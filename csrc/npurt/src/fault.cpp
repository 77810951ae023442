// Fault injection countdowns. See fault.h.
#include "fault.h"

namespace npurt::internal {
bool FaultInjector::countDown(std::atomic<uint64_t>& countdown) noexcept {
  // Several threads may count at once: each decrement is one call, and only
  // the one that takes the count from 1 to 0 fires (one-shot).
  uint64_t n = countdown.load(std::memory_order_relaxed);
  while (n != 0) {
    if (countdown.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return n == 1;
  }
  return false;  // fired (or disarmed) by another thread meanwhile
}

}  // namespace npurt::internal
