// Helpers of the op layer: run work on a stream, view device memory as CPU
// tensors, allocate npu tensors.
//
// Layer: ops (csrc/aten). May use core and ATen; nothing here is Python.
//
// Note [Ops run on streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op on npu tensors runs as a task on the current stream of its
// device: the calling thread computes output metadata, allocates outputs and
// queues the computation; a device executor later runs the CPU kernel over
// the device memory (device memory is host memory in the simulator, so a CPU
// tensor over the same bytes — cpuAlias — is the kernel's view of it). A task
// captures everything it needs (tensors, as non-owning aliases where stream
// order makes that safe — Note [Task captures and memory reuse] in
// AsyncFallback.cpp — and by value otherwise; generator seeds; options) and
// never reads the calling thread's thread-local state.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "core/NPUStream.h"
#include "core/StreamLimits.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu::aten {

// A CPU tensor over the same memory, sizes and strides as `npu` (an npu
// tensor). Only for use inside tasks (or after the stream was synchronized).
// Thread-safe.
at::Tensor cpuAlias(const at::Tensor& npu);

// An uninitialised npu tensor on `device`, allocated on the device's current
// stream. Thread-safe.
at::Tensor emptyNpu(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype,
                    c10::DeviceIndex device);

namespace detail {

// Note [Task captures are released on producer threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task's captures (tensors, storages) must not be destroyed on a device
// executor: dropping the last reference to a tensor that Python knows takes
// the GIL, which an executor must never wait for (it deadlocks with a host
// thread that holds the GIL and waits for the device, and it aborts the
// process during interpreter shutdown). So a finished task is parked on a
// lock-free list, and threads that launch work (or drain) destroy what is
// parked there. Frees of tensor memory thereby also happen on host threads.
struct Deferred {
  void* user;
  void (*destroy)(void*);
  Deferred* next;
};

// Parks a finished task's captures. Lock-free; called on executor threads.
void deferRelease(void* user, void (*destroy)(void*)) noexcept;

// Destroys everything parked so far. Thread-safe; call on host threads only.
void releaseDeferred() noexcept;

// Configures the calling executor thread's intra-op parallelism (OpenMP and
// BLAS thread counts are per thread) like PyTorch's own threads, once per
// thread; otherwise kernels on executors may run with a different number of
// threads than the same kernels on the host. Cheap after the first call.
void initExecutorThread() noexcept;

template <typename F>
void destroyCallable(void* user) {
  std::unique_ptr<F> owned(static_cast<F*>(user));
}

// Caps the calling executor thread's intra-op parallelism to `threads` for
// its lifetime (0 = no cap), restoring the previous value after. OpenMP's
// thread count is a per-thread setting, so other executors are unaffected.
// See Note [Stream resource limits on the simulated NPU] in StreamLimits.h.
class IntraOpCap {
 public:
  explicit IntraOpCap(int threads) noexcept;
  ~IntraOpCap();
  IntraOpCap(const IntraOpCap&) = delete;
  IntraOpCap& operator=(const IntraOpCap&) = delete;

 private:
  int previous_ = 0;  // 0: nothing changed
};

// A kernel and the intra-op cap of the stream it was queued on, captured at
// enqueue like every other input of the task.
template <typename F>
struct CappedKernel {
  F fn;
  int cap;
  void operator()() {
    IntraOpCap guard(cap);
    fn();
  }
};

template <typename F>
int runKernel(void* user, char* errorBuf, size_t errorBufSize) {
  // Executor threads start with default thread-local state; make the kernel
  // run below autograd so that CPU kernels never record graphs. See
  // Note [Ops run on streams]. c10::Error's what() carries a C++ backtrace;
  // the task's message keeps the readable part only.
  return npurt::detail::invokeCapturing(
      [user] {
        try {
          initExecutorThread();
          c10::impl::ExcludeDispatchKeyGuard noAutograd(
              c10::autograd_dispatch_keyset_with_ADInplaceOrView);
          (*static_cast<F*>(user))();
        } catch (const c10::Error& e) {
          throw std::runtime_error(e.what_without_backtrace());
        }
      },
      errorBuf, errorBufSize);
}

template <typename F>
void releaseKernel(void* user) {
  deferRelease(user, &destroyCallable<F>);
}

}  // namespace detail

// Queues f() on `stream` (through the task queue). `name` must have static
// storage duration (an operator's schema name is). An exception thrown by f
// becomes a task failure reported at the stream's next synchronize, naming
// the op. Thread-safe.
template <typename F>
void launchKernel(const NPUStream& stream, const char* name, F&& f) {
  using Fn = detail::CappedKernel<std::decay_t<F>>;
  detail::releaseDeferred();
  auto owned = std::make_unique<Fn>(Fn{std::forward<F>(f), limits::intraOpThreads(stream)});
  npuTask task{};
  task.name = name;
  task.run = &detail::runKernel<Fn>;
  task.release = &detail::releaseKernel<Fn>;
  task.userData = owned.release();  // queue::launch owns it from here on, also on failure
  queue::launch(stream, task);
}

}  // namespace c10_npu::aten
