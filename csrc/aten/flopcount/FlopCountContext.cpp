#include "aten/flopcount/FlopCountContext.h"

#include "aten/OpObservers.h"

namespace c10_npu::aten {
namespace {

// Constant-initialised (constexpr constructor): no initialisation-order
// question for the op path, which may read it from any library's static
// initialisers on.
constinit FlopCountContext gContext;

}  // namespace

FlopCountContext& FlopCountContext::GetInstance() noexcept { return gContext; }

void FlopCountContext::enable() noexcept {
  enabled_.store(true, std::memory_order_relaxed);
  detail::setOpObserver(detail::kFlopCount, true);
}

void FlopCountContext::disable() noexcept {
  enabled_.store(false, std::memory_order_relaxed);
  detail::setOpObserver(detail::kFlopCount, false);
}

void FlopCountContext::reset() noexcept {
  disable();
  resume();
  recorded_.store(0, std::memory_order_relaxed);
  traversed_.store(0, std::memory_order_relaxed);
}

void FlopCountContext::record(int64_t flops) noexcept {
  traversed_.fetch_add(flops, std::memory_order_relaxed);
  if (!isPaused()) recorded_.fetch_add(flops, std::memory_order_relaxed);
}

}  // namespace c10_npu::aten
