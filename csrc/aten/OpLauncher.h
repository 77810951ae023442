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
// OpTask.cpp — and by value otherwise; generator seeds; options) and
// never reads the calling thread's thread-local state.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/CPUAlias.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/PoisonedMemory.h"
#include "core/StreamLimits.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.hpp"

namespace c10_npu::aten {

// cpuAlias lives in the core (core/CPUAlias.h) so that layers beside the op
// layer (csrc/distributed) can view device memory too.
using c10_npu::cpuAlias;

// An uninitialised npu tensor on `device`, allocated on the device's current
// stream. Defined in Factories.cpp (Note [npu tensors are made with
// NPUStorageImpl]). Thread-safe.
at::Tensor emptyNpu(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype,
                    c10::DeviceIndex device);

// The device memory a task reads and writes, by storage, so that a task whose
// work does not run poisons what it would have written and a task that reads
// poisoned memory spreads the poison instead of computing from garbage. See
// Note [Poisoned memory] in csrc/core/PoisonedMemory.h. Built on the calling
// thread at enqueue; read by the executor.
struct TaskAccess {
  struct Write {
    poison::StorageRef storage;
    bool whole;  // covers the whole storage
  };
  c10::SmallVector<poison::StorageRef, 4> reads;  // storages of npu inputs
  c10::SmallVector<Write, 2> writes;              // npu outputs (fresh, in-place, out=)
  bool writesHost = false;                        // writes host memory (a copy to cpu)
  // The byte spans of the tensors read and written, for npurt's race
  // detector; filled only while it is on (core/RaceCheck.h), else empty.
  std::vector<npuMemAccess> declared;

  // Records an npu tensor as read / written. Tensors without storage are
  // ignored. Not thread-safe (one builder).
  void read(const at::Tensor& npu);
  void write(const at::Tensor& npu);

  // The poison of the first poisoned read, or nullptr. Thread-safe.
  poison::Message poisonedRead() const;
  // Marks every write with `message` (Note [Poisoned memory]). Thread-safe.
  void poisonWrites(const poison::Message& message) const noexcept;
  // Clears the mark of every write that covered its whole storage.
  void clearWholeWrites() const noexcept;
};

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
//
// Note [Tasks that hold only aliases are released where they ran]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Most op tasks capture nothing the note above is about: CPU aliases of
// memory of their own stream (which own no memory, and which Python never
// saw), wrapped Python numbers, plain values. Destroying those on the host
// thread cost a small op about a tenth of its host time, so such a task
// (ReleaseOn::kAnyThread, decided at enqueue by whoever built the captures)
// is destroyed by the executor that ran it. A task recorded into a graph is
// always parked, as its release comes with the graph's destruction.
//
// Note [Op tasks are recycled, not malloc'd]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task object is made on the host thread and, by the note above, usually
// destroyed on an executor. glibc's malloc serves that pattern from its
// arena under a lock on both sides, and on a 2-CPU machine the two threads
// met at that lock on nearly every op: the host spent a third of its time
// waking an executor blocked in free() (perf, `x + 1` on 16 floats; the op
// took 5.2 us on the host against 2.6 us with jemalloc preloaded). So task
// objects live in npuTaskDataAlloc's blocks, which executors hand back to
// the host threads through lock-free lists. Whatever else a task holds that
// the host allocated is kept inline in the task for the same reason (the
// arguments: OpTask's TaskArgs; Note [Aliases are made where the kernel
// runs] in DeferredArgs.h for the tensors and numbers).
struct Deferred {
  void* user;
  void (*destroy)(void*);
  Deferred* next;
};

// Parks a finished task's captures. Lock-free; called on executor threads.
void deferRelease(void* user, void (*destroy)(void*)) noexcept;

// Destroys everything parked so far. Thread-safe; call on host threads only.
void releaseDeferred() noexcept;

// Notes that a task queued on `stream` holds device memory by reference
// (Note [Task captures and memory reuse]): before raising out-of-memory, the
// allocator then waits for the work queued so far on such streams of the
// device and frees what it held (Note [Memory held by queued tasks] in
// core/NPUCachingAllocator.h). Thread-safe.
void noteHeldByTask(const NPUStream& stream);

// Configures the calling executor thread's intra-op parallelism (OpenMP and
// BLAS thread counts are per thread) like PyTorch's own threads, once per
// thread; otherwise kernels on executors may run with a different number of
// threads than the same kernels on the host. Cheap after the first call.
void initExecutorThread() noexcept;

// Destroys a task made by launchKernel (npurt::makeTaskData: Note [Op tasks
// are recycled, not malloc'd]).
template <typename F>
void destroyCallable(void* user) {
  npurt::TaskDataPtr<F> owned(static_cast<F*>(user));
}

// Where a finished task's captures are destroyed. See Note [Tasks that hold
// only aliases are released where they ran].
enum class ReleaseOn : uint8_t { kHostThread, kAnyThread };

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

// A queued kernel: the callable, the intra-op cap of the stream it was queued
// on (captured at enqueue like every other input of the task) and what it
// reads and writes.
template <typename F>
struct KernelTask {
  enum class State : uint8_t { kQueued, kDone, kSkipped };
  F fn;
  int cap;
  TaskAccess access;
  NPUStream stream;
  const char* name;
  State state = State::kQueued;  // kQueued until run() succeeded or skipped
  // The kernel's own failure, for the poison of its writes: npurt calls a
  // task's release right after a failed run, before the stream holds the
  // failure (so notRunMessage could not find it yet).
  poison::Message failure;
  // Recorded into a graph (capture or task-group update): see Note
  // [Replayed op tasks].
  bool captured = false;
  ReleaseOn releaseOn = ReleaseOn::kHostThread;
};

// Why a task's work did not run, for its poison: the launch refusal, else the
// stream's held failure (the task failed or was discarded), else a generic
// text. Called from a release, on an executor or a host thread.
poison::Message notRunMessage(const NPUStream& stream, const char* name) noexcept;

// The poison message of a task whose kernel failed with `what`: the text its
// stream reports, "task '<name>' failed on npu:<device>: <what>".
poison::Message failureMessage(const NPUStream& stream, const char* name,
                               const char* what) noexcept;

// Runs a kernel's poison check and body. Returns 0, or non-zero with the
// message in errorBuf (the runtime's task contract).
template <typename F>
int runKernel(void* user, char* errorBuf, size_t errorBufSize) {
  auto* task = static_cast<KernelTask<F>*>(user);
  if (poison::any()) {
    if (poison::Message message = task->access.poisonedRead()) {
      // See Note [Poisoned memory]: spread the poison, do not compute.
      task->access.poisonWrites(message);
      task->state = KernelTask<F>::State::kSkipped;
      if (!task->access.writesHost) return 0;
      std::snprintf(errorBuf, errorBufSize, "%s", poison::describe(message).c_str());
      return 1;
    }
  }
  // Executor threads start with default thread-local state; make the kernel
  // run below autograd so that CPU kernels never record graphs. See
  // Note [Ops run on streams]. c10::Error's what() carries a C++ backtrace;
  // the task's message keeps the readable part only.
  const int status = npurt::detail::invokeCapturing(
      [task] {
        try {
          initExecutorThread();
          c10::impl::ExcludeDispatchKeyGuard noAutograd(
              c10::autograd_dispatch_keyset_with_ADInplaceOrView);
          IntraOpCap cap(task->cap);
          task->fn();
        } catch (const c10::Error& e) {
          throw std::runtime_error(e.what_without_backtrace());
        }
      },
      errorBuf, errorBufSize);
  if (status == 0) {
    task->state = KernelTask<F>::State::kDone;
    if (poison::any()) task->access.clearWholeWrites();
  } else if (!task->access.writes.empty()) {
    task->failure = failureMessage(task->stream, task->name, errorBuf);
  }
  return status;
}

// Note [Replayed op tasks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel task launched on a capturing stream (or collected for a task-group
// update) is recorded by npurt: run() is called once per replay, release()
// once, when the graph and its exec are destroyed (Note [Replayable tasks] in
// csrc/npurt/src/graph/node_work.h). So a task consumes nothing it captured
// (its callable is const; its random seed resolves per replay, Note [Random
// numbers of captured ops]), its state only says how the last run went, and
// the release of a captured task poisons nothing: not having run since the
// last replay is not a failure. Its memory stays valid because everything the
// capture allocated comes from the graph's private pool, which the graph
// holds until reset (tensors freed during the capture return to that pool,
// not to the general cache), and tensors of other streams are held by the
// task itself (Note [Task captures and memory reuse]). A failing replay
// poisons every storage the graph writes (Note [A failing replay poisons the
// graph's outputs] in csrc/core/graphs/NPUGraph.cpp): the failed node's
// outputs and those of the nodes the failure skipped alike; for that, every
// captured task lists its writes with the graph at enqueue. What a recorded
// op task can prepare for all its runs, it prepares when it is recorded
// (Note [Replayed op tasks build their arguments once] in ReplayArgs.h).
//
// Called by npurt after run() or instead of it (a discarded task), or by the
// task queue for a launch it could not make: a task whose work did not run
// poisons its writes, then its captures are parked for a host thread.
template <typename F>
void releaseKernel(void* user) {
  auto* task = static_cast<KernelTask<F>*>(user);
  const std::string* refused = queue::failedLaunchMessage();
  const bool raisedToCaller = refused != nullptr && refused->empty();
  if (!task->captured && task->state == KernelTask<F>::State::kQueued &&
      !task->access.writes.empty() && !raisedToCaller) {
    task->access.poisonWrites(task->failure != nullptr ? task->failure
                                                       : notRunMessage(task->stream, task->name));
  }
  if (task->releaseOn == ReleaseOn::kAnyThread && !task->captured) {
    destroyCallable<KernelTask<F>>(user);
    return;
  }
  deferRelease(user, &destroyCallable<KernelTask<F>>);
}

}  // namespace detail

// Queues f() on `stream` (through the task queue). `name` must have static
// storage duration (an operator's schema name is). An exception thrown by f
// becomes a task failure reported at the stream's next synchronize, naming
// the op. `access` lists the device memory f reads and writes (Note
// [Poisoned memory]). `releaseOn`: see Note [Tasks that hold only aliases
// are released where they ran]. Thread-safe.
template <typename F>
void launchKernel(const NPUStream& stream, const char* name, TaskAccess access, F&& f,
                  detail::ReleaseOn releaseOn = detail::ReleaseOn::kHostThread) {
  using Task = detail::KernelTask<std::decay_t<F>>;
  detail::releaseDeferred();
  bool captured = false;
  if (graphs::anyCapture()) {  // See Note [Replayed op tasks].
    if (auto graph = graphs::recorderOf(stream)) {
      captured = true;
      for (const auto& w : access.writes) graph->noteWrite(w.storage);
    }
  }
  // Note [Op tasks are recycled, not malloc'd]. The fields go to makeTaskData
  // one by one, so the task is built in its block rather than built as a
  // temporary and moved there (a copy of about 1 KiB per op).
  auto owned = npurt::makeTaskData<Task>(std::forward<F>(f), limits::intraOpThreads(stream),
                                         std::move(access), stream, name, Task::State::kQueued,
                                         poison::Message{}, captured, releaseOn);
  // Race detector only: the task's spans, keyed by its userData (Note
  // [Happens-before model] in csrc/npurt/src/racecheck/racecheck.h).
  if (!owned->access.declared.empty()) [[unlikely]] {
    const std::vector<npuMemAccess>& d = owned->access.declared;
    (void)npuTaskDeclareAccesses(owned.get(), d.data(), d.size());
  }
  npuTask task{};
  task.name = name;
  task.run = &detail::runKernel<std::decay_t<F>>;
  task.release = &detail::releaseKernel<std::decay_t<F>>;
  task.userData = owned.release();  // queue::launch owns it from here on, also on failure
  queue::launch(stream, task);
}

// Note [Kernels the host waits for raise at the call]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel whose results the host waits for (the synchronous op path, Note
// [The synchronous op path]; sparse ops) is a CPU call made synchronously:
// its exception belongs to the call, as on CPU, not to the stream. So such a
// task catches what f throws, and the host rethrows it after the wait, with
// its type (IndexError, ValueError, NotImplementedError, ...) and message; the
// stream is not failed, the work queued behind the task still runs, and
// nothing is poisoned: the arguments hold whatever the kernel left in them,
// as CPU's do. This is how an argument error that a meta kernel raises
// (`int_tensor.add_(1.5)`: "result type Float can't be cast ...") reaches the
// caller once, at the call, and leaves the tensor intact. Failures that are
// not f's own (a poisoned input, a refused launch) still fail the stream.

// Queues f() on `stream` like launchKernel, waits for the stream as a host
// read does (waitForHostRead), and rethrows f's exception, if any, on the
// calling thread. Thread-safe.
template <typename F>
void launchKernelAndWait(const NPUStream& stream, const char* name, TaskAccess access, F&& f) {
  access.writesHost = true;  // the results come back to the host
  auto error = std::make_shared<std::exception_ptr>();
  launchKernel(stream, name, std::move(access), [f = std::forward<F>(f), error]() mutable {
    try {
      f();
    } catch (...) {
      *error = std::current_exception();
    }
  });
  waitForHostRead(stream);  // raises failures that are not f's
  if (*error) std::rethrow_exception(*error);
}

// A kernel that touches no tensor memory (tests, host work).
template <typename F>
void launchKernel(const NPUStream& stream, const char* name, F&& f) {
  launchKernel(stream, name, TaskAccess{}, std::forward<F>(f));
}

}  // namespace c10_npu::aten
