// See NPUTrace.h and Note [Trace hooks].
#include "core/NPUTrace.h"

namespace c10_npu::trace {
namespace detail {

std::atomic<bool> gNpuTraceActive{false};

namespace {

// Written once by the binding before the trace can be activated, read by any
// thread: atomics, so that a hook racing with registration sees either.
std::atomic<StreamUseHook> gRecordStreamHook{nullptr};
std::atomic<StreamUseHook> gEraseStreamHook{nullptr};

void fireStreamUse(const std::atomic<StreamUseHook>& hook, const void* ptr,
                   const NPUStream& stream) noexcept {
  if (ptr == nullptr || tracer() == nullptr) return;
  StreamUseHook fn = hook.load(std::memory_order_acquire);
  if (fn == nullptr) return;
  try {
    fn(asInt(ptr), asInt(stream.rawHandle()));
  } catch (...) {
    // rawHandle of an external stream destroyed meanwhile: nothing to report.
  }
}

}  // namespace
}  // namespace detail

void setActive(bool active) noexcept {
  detail::gNpuTraceActive.store(active, std::memory_order_relaxed);
}

bool isActive() noexcept { return detail::gNpuTraceActive.load(std::memory_order_relaxed); }

void setStreamUseHooks(StreamUseHook record_stream, StreamUseHook erase_stream) noexcept {
  detail::gRecordStreamHook.store(record_stream, std::memory_order_release);
  detail::gEraseStreamHook.store(erase_stream, std::memory_order_release);
}

void streamRecorded(const void* ptr, const NPUStream& stream) noexcept {
  detail::fireStreamUse(detail::gRecordStreamHook, ptr, stream);
}

void streamErased(const void* ptr, const NPUStream& stream) noexcept {
  detail::fireStreamUse(detail::gEraseStreamHook, ptr, stream);
}

}  // namespace c10_npu::trace
