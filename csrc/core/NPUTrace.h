// Trace hooks of the framework core: what a stream sanitizer needs to know
// about streams, events and memory, reported through PyTorch's GPU trace.
//
// Layer: framework core. Knows nothing of Python: the hooks call
// c10::impl::GPUTrace's interpreter for DeviceType::PrivateUse1, which PyTorch
// turns into `torch.npu._gpu_trace.<Kind>Callbacks.fire_callbacks(...)`
// (torch/csrc/PyInterpreter.cpp); the two hooks GPUTrace has no slot for
// (record_stream, erase_stream) go to functions the binding registers.
//
// Note [Trace hooks]
// ~~~~~~~~~~~~~~~~~~
// - Off by default. They fire only while the npu trace is active
//   (torch_npu._C._activate_npu_trace, what the stream sanitizer calls) *and*
//   PyTorch's GPU trace is active (which activation also turns on). Turning
//   on PyTorch's GPU trace alone (torch._C._activate_gpu_trace, or importing
//   torch.cuda._sanitizer) does not make npu hooks fire, as in torch_npu,
//   whose NPUTrace is separate from GPUTrace.
// - Cost while off: tracer() reads GPUTrace's plain bool and returns; once
//   some code activated GPUTrace, one more relaxed atomic load. Nothing else
//   runs, so the hooks may sit on hot paths (allocation, free, event record).
// - The values: streams and events are their runtime handles as integers
//   (npuStream_t, npuEvent_t: what Stream.npu_stream and Event.npu_event read;
//   a stream's handle is looked up only while the trace is on), memory is the
//   block's device pointer (a storage's data_ptr()).
// - Where and when: on the host thread that made the call, never on a
//   task-queue consumer, and on a device executor only inside a Python host
//   callback (which holds the GIL already). The Python side takes the GIL, so a
//   hook must not run under a lock that a thread holding the GIL may wait
//   for: none of the allocator's (a hook there would deadlock with a thread
//   that holds the GIL and allocates), no call_once body; the binding takes an
//   event object's mutex only with the GIL released (withEvent in
//   csrc/python/Streams.cpp), so NPUEvent's and NPUExternalEvent's hooks may
//   fire under it.
//   Creation, record, wait, synchronization and allocation fire after the
//   call succeeded; deletion and free fire before the handle or block goes.
// - Hooks never throw: PyTorch's side logs a failing callback and returns.
#pragma once

#include <c10/core/impl/GPUTrace.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <cstdint>

#include "core/NPUStream.h"
#include "npurt/npurt.h"

namespace c10_npu::trace {

namespace detail {
extern std::atomic<bool> gNpuTraceActive;
constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
// Handles are process-unique integers in pointer types (Note [Handle
// validation] in csrc/npurt/README.md); pointers are addresses.
template <typename T>
uintptr_t asInt(T* handle) noexcept {
  return reinterpret_cast<uintptr_t>(handle);
}
}  // namespace detail

// The interpreter to report to, or nullptr while the npu trace is off (Note
// [Trace hooks]). Thread-safe; one load in the common case.
inline const c10::impl::PyInterpreter* tracer() noexcept {
  const c10::impl::PyInterpreter* interp = c10::impl::GPUTrace::get_trace();
  if (C10_LIKELY(interp == nullptr)) return nullptr;
  // relaxed: turning the trace on or off orders nothing else; a call racing
  // with the switch may or may not be reported.
  return detail::gNpuTraceActive.load(std::memory_order_relaxed) ? interp : nullptr;
}

namespace detail {
// Calls f(vtable) if the trace is on. PyTorch's side catches and logs what a
// Python callback raises; anything else is dropped here, as hooks must not
// change the outcome of the call they report.
template <typename F>
inline void fire(F&& f) noexcept {
  const c10::impl::PyInterpreter* t = tracer();
  if (C10_LIKELY(t == nullptr)) return;
  try {
    f(**t);
  } catch (...) {
  }
}
}  // namespace detail

// Turns the npu hooks on or off. PyTorch's GPU trace must already be active
// for them to fire (the binding's _activate_npu_trace activates both).
// Thread-safe.
void setActive(bool active) noexcept;
bool isActive() noexcept;

// The hooks GPUTrace has no slot for, fired with (storage data pointer,
// runtime stream handle). Registered once by the binding. Thread-safe.
using StreamUseHook = void (*)(uintptr_t data_ptr, uintptr_t stream) noexcept;
void setStreamUseHooks(StreamUseHook record_stream, StreamUseHook erase_stream) noexcept;

// One function per event kind; each is a no-op while tracer() is null. All
// are thread-safe and noexcept. See Note [Trace hooks] for when each fires.
// Inline so that the check is all a call costs while the trace is off.
inline void eventCreated(npuEvent_t event) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_event_creation(detail::kNpu, detail::asInt(event));
  });
}
inline void eventDeleted(npuEvent_t event) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_event_deletion(detail::kNpu, detail::asInt(event));
  });
}
inline void eventRecorded(npuEvent_t event, const NPUStream& stream) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_event_record(detail::kNpu, detail::asInt(event),
                              detail::asInt(stream.rawHandle()));
  });
}
inline void eventWaited(npuEvent_t event, const NPUStream& stream) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_event_wait(detail::kNpu, detail::asInt(event), detail::asInt(stream.rawHandle()));
  });
}
inline void eventSynchronized(npuEvent_t event) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_event_synchronization(detail::kNpu, detail::asInt(event));
  });
}
inline void streamCreated(npuStream_t stream) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_stream_creation(detail::kNpu, detail::asInt(stream));
  });
}
inline void streamSynchronized(const NPUStream& stream) noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_stream_synchronization(detail::kNpu, detail::asInt(stream.rawHandle()));
  });
}
inline void deviceSynchronized() noexcept {
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_device_synchronization(detail::kNpu);
  });
}
inline void memoryAllocated(const void* ptr) noexcept {
  if (ptr == nullptr) return;  // zero-size allocations have no block
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_memory_allocation(detail::kNpu, detail::asInt(ptr));
  });
}
inline void memoryFreed(const void* ptr) noexcept {
  if (ptr == nullptr) return;  // zero-size allocations have no block
  detail::fire([&](const c10::impl::PyInterpreterVTable& vt) {
    vt.trace_gpu_memory_deallocation(detail::kNpu, detail::asInt(ptr));
  });
}

// record_stream / erase_stream of the caching allocator (torch_npu's
// NPURecordStreamCallbacks / NPUEraseStreamCallbacks): to the binding's hooks.
void streamRecorded(const void* ptr, const NPUStream& stream) noexcept;
void streamErased(const void* ptr, const NPUStream& stream) noexcept;

}  // namespace c10_npu::trace
