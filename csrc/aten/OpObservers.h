// What watches ops on npu: the dispatch logs (TORCH_NPU_LOGS=dispatch,
// dispatch_time) and the FLOP counter (flopcount/). Internal to csrc/aten.
//
// Note [Op observers]
// ~~~~~~~~~~~~~~~~~~~
// Every observer is off by default and the op path is hot (a tiny op costs a
// few microseconds, issue 10), so the op path learns that nothing watches
// with ONE relaxed load of one word and one branch: gOpObservers holds a bit
// per observer, kept up to date by whoever turns an observer on or off (the
// FLOP counter's enable/disable; for the loggers, a LogContext level
// listener). Relaxed is enough: turning an observer on orders nothing else,
// and an op racing with the switch on another thread is observed or not,
// either being correct. When the word is non-zero, the op takes the
// observed variant of its entry point, which does the observers' work
// around the same code (AsyncFallback.cpp, Convolution.cpp,
// HalfMatmul.cpp).
//
// What is observed, and when: an op is counted (flopcount/FlopCounter.h) and
// logged on its calling thread after it was queued or ran, so an op that
// raised at the call is neither counted nor logged as run. Logged at DEBUG
// on "torch_npu.dispatch": the op's name and path (asynchronous: queued on
// a stream; synchronous: the host waited for the stream, Note [The
// synchronous op path]). At INFO on "torch_npu.dispatch.time": the host time
// of the call on the generic op path.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>

#include "aten/flopcount/FlopCountContext.h"

namespace c10_npu::aten::detail {

enum OpObserver : uint32_t {
  kDispatchLog = 1u << 0,      // "torch_npu.dispatch" at DEBUG
  kDispatchTimeLog = 1u << 1,  // "torch_npu.dispatch.time" at INFO
  kFlopCount = 1u << 2,        // FlopCountContext enabled
};

// See Note [Op observers]. Constant-initialised.
extern std::atomic<uint32_t> gOpObservers;

// The active observers' bits; 0 nearly always. Thread-safe (hot path).
inline uint32_t activeOpObservers() noexcept {
  return gOpObservers.load(std::memory_order_relaxed);
}

// Turns one observer's bit on or off. Thread-safe.
void setOpObserver(OpObserver which, bool on) noexcept;

// Logs, on "torch_npu.dispatch" if `observers` has kDispatchLog, that op
// `name` took the asynchronous path (queued on the current stream of
// `device`) or the synchronous one. Thread-safe.
void logOpPath(uint32_t observers, const char* name, bool async, c10::DeviceIndex device);

// Logs the host time of op `name` on "torch_npu.dispatch.time" if
// `observers` has kDispatchTimeLog. Thread-safe.
void logOpTime(uint32_t observers, const char* name, int64_t nanoseconds);

// Adds `flops()` to the FLOP counter if `observers` has kFlopCount (the
// formula runs only then). Thread-safe.
template <typename Flops>
void countFlops(uint32_t observers, Flops&& flops) {
  if ((observers & kFlopCount) != 0) FlopCountContext::GetInstance().record(flops());
}

}  // namespace c10_npu::aten::detail
