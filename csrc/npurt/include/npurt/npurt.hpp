// npurt — thin C++ convenience layer over the C API in npurt.h.
//
// Layer: device runtime. Header-only; everything here is built on the public
// C functions, so it works across the shared-library boundary unchanged.
//
// Thread safety: every function here is as thread-safe as the C function it
// wraps (all of them may be called from several threads at once).
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "npurt/npurt.h"

namespace npurt {

// Exception carrying an npuError_t; what() is "<name>: <detailed message>".
class Error : public std::runtime_error {
 public:
  Error(npuError_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  npuError_t code() const noexcept { return code_; }

 private:
  npuError_t code_;
};

// Throws npurt::Error if status is not npuSuccess, with the thread's last
// error message. Use for runtime statuses that indicate a failure (not for
// npuErrorNotReady from query functions).
inline void check(npuError_t status) {
  if (status == npuSuccess) return;
  std::string message = npuGetErrorName(status);
  const char* detail = npuGetLastErrorMessage();
  message += ": ";
  message += (detail != nullptr && detail[0] != '\0') ? detail : npuGetErrorString(status);
  throw Error(status, message);
}

// Deletes an object made by makeTaskData. See npuTaskDataAlloc.
template <typename T>
struct TaskDataDeleter {
  void operator()(T* object) const noexcept {
    object->~T();
    (void)npuTaskDataFree(object, sizeof(T));
  }
};

// Owner of a task's userData made by makeTaskData.
template <typename T>
using TaskDataPtr = std::unique_ptr<T, TaskDataDeleter<T>>;

// Constructs a T in memory from npuTaskDataAlloc: for userData allocated on
// the launching thread and destroyed in release() on an executor, without the
// cost malloc has for that pattern. Throws std::bad_alloc, or what T's
// constructor throws (the memory is returned then).
template <typename T, typename... Args>
TaskDataPtr<T> makeTaskData(Args&&... args) {
  static_assert(alignof(T) <= 64, "npuTaskDataAlloc aligns to 64 bytes");
  void* memory = nullptr;
  if (npuTaskDataAlloc(&memory, sizeof(T)) != npuSuccess) throw std::bad_alloc();
  try {
    if constexpr (std::is_aggregate_v<T>) {
      return TaskDataPtr<T>(::new (memory) T{std::forward<Args>(args)...});
    } else {
      return TaskDataPtr<T>(::new (memory) T(std::forward<Args>(args)...));
    }
  } catch (...) {
    (void)npuTaskDataFree(memory, sizeof(T));
    throw;
  }
}

namespace detail {

// Runs f(); an exception becomes a failed task (return 1) whose message is
// written to errorBuf. Exceptions must never cross the C boundary.
template <typename F>
int invokeCapturing(F&& f, char* errorBuf, size_t errorBufSize) noexcept {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(errorBuf, errorBufSize, "%s", e.what());
  } catch (...) {
    std::snprintf(errorBuf, errorBufSize, "unknown exception");
  }
  return 1;
}

template <typename F>
int runCallable(void* user, char* errorBuf, size_t errorBufSize) {
  return invokeCapturing(*static_cast<F*>(user), errorBuf, errorBufSize);
}

template <typename F>
void releaseCallable(void* user) {
  TaskDataPtr<F> owned(static_cast<F*>(user));
}

// Small-callable optimisation (as std::function's small buffer): a callable
// that is trivially copyable and fits in a pointer travels inside userData by
// value, so launching it allocates nothing and needs no release.
template <typename F>
inline constexpr bool kStoredInline =
    std::is_trivially_copyable_v<F> && std::is_trivially_destructible_v<F> &&
    sizeof(F) <= sizeof(void*) && alignof(F) <= alignof(void*);

template <typename F>
int runInlineCallable(void* user, char* errorBuf, size_t errorBufSize) {
  alignas(F) unsigned char storage[sizeof(F)];
  std::memcpy(storage, &user, sizeof(F));
  // The bytes were copied from a live F, and F is trivially copyable.
  return invokeCapturing(*std::launder(reinterpret_cast<F*>(storage)), errorBuf, errorBufSize);
}

}  // namespace detail

// Enqueues a (possibly move-only) callable on a stream. `name` must have static storage
// duration (a literal or an operator schema name) unless copyName is true.
// On a capturing stream the callable is recorded instead: it is then invoked
// (as an lvalue) once per launch of the graph and destroyed when the graph
// and its execs are gone, so it must be callable repeatedly (Note
// [Replayable tasks] in csrc/npurt/src/graph/node_work.h).
// An exception thrown by f is captured as a task failure (npuErrorLaunchFailure
// at the next query/synchronize of the stream). On error the callable is
// destroyed here and the status returned; nothing is enqueued.
template <typename F>
npuError_t launch(npuStream_t stream, const char* name, F&& f, bool copyName = false) {
  using Fn = std::decay_t<F>;
  const unsigned flags = copyName ? npuTaskCopyName : 0u;
  if constexpr (detail::kStoredInline<Fn>) {
    Fn value(std::forward<F>(f));
    // The bytes go into a local first and the task is written one whole
    // field at a time: npuLaunchTask reads each field with one 8-byte load,
    // and a load that spans two stores (a zeroed field and a 1-byte copy of
    // an empty lambda) cannot be forwarded from the store buffer, so it
    // would wait for every older store of this thread to reach the cache.
    void* userData = nullptr;
    std::memcpy(&userData, &value, sizeof(Fn));
    const npuTask task{name, &detail::runInlineCallable<Fn>, nullptr, userData, flags};
    return npuLaunchTask(stream, &task);
  }
  auto owned = makeTaskData<Fn>(std::forward<F>(f));
  const npuTask task{name, &detail::runCallable<Fn>, &detail::releaseCallable<Fn>, owned.get(),
                     flags};
  npuError_t status = npuLaunchTask(stream, &task);
  if (status == npuSuccess) owned.release();  // the runtime owns it now
  return status;
}

// launch() with the device memory f reads and writes declared for the race
// detector (npuTaskDeclareAccesses; Note [Happens-before model]), e.g.
//   npurt::launch(s, "lib::scale", {{x, n * 4, npuMemAccessReadWrite}}, [=] {...});
// The callable is always stored on the heap, so its address identifies the
// task. Without the detector on this is launch() plus one cheap call.
template <typename F>
npuError_t launch(npuStream_t stream, const char* name,
                  std::initializer_list<npuMemAccess> accesses, F&& f, bool copyName = false) {
  using Fn = std::decay_t<F>;
  auto owned = makeTaskData<Fn>(std::forward<F>(f));
  if (const npuError_t s = npuTaskDeclareAccesses(owned.get(), accesses.begin(), accesses.size());
      s != npuSuccess) {
    return s;
  }
  const npuTask task{name, &detail::runCallable<Fn>, &detail::releaseCallable<Fn>, owned.get(),
                     copyName ? npuTaskCopyName : 0u};
  const npuError_t status = npuLaunchTask(stream, &task);
  if (status == npuSuccess) {
    owned.release();  // the runtime owns it now
  } else {
    (void)npuTaskDeclareAccesses(owned.get(), nullptr, 0);  // withdrawn: see npurt_racecheck.h
  }
  return status;
}

// RAII owner of a runtime handle (H = npuStream_t or npuEvent_t): destroys
// it on scope exit. Move-only.
template <typename H, npuError_t (*kDestroy)(H)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(H h) noexcept : handle_(h) {}
  UniqueHandle(UniqueHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  H get() const noexcept { return handle_; }
  void reset() noexcept {
    if (handle_ != nullptr) (void)kDestroy(std::exchange(handle_, nullptr));
  }

 private:
  H handle_ = nullptr;
};

// Owner of a stream; create() makes one on the current device (throws
// npurt::Error on failure).
class StreamHandle : public UniqueHandle<npuStream_t, &npuStreamDestroy> {
 public:
  using UniqueHandle::UniqueHandle;
  static StreamHandle create(unsigned flags = npuStreamDefault, int priority = 0) {
    npuStream_t s = nullptr;
    check(npuStreamCreateWithPriority(&s, flags, priority));
    return StreamHandle(s);
  }
};

// Owner of an event; create() throws npurt::Error on failure.
class EventHandle : public UniqueHandle<npuEvent_t, &npuEventDestroy> {
 public:
  using UniqueHandle::UniqueHandle;
  static EventHandle create(unsigned flags = npuEventDefault) {
    npuEvent_t e = nullptr;
    check(npuEventCreateWithFlags(&e, flags));
    return EventHandle(e);
  }
};

// Owner of a graph (npuStreamEndCapture) and of an executable graph
// (npuGraphInstantiate); see Note [Stream capture] and Note [Graph launch].
using GraphHandle = UniqueHandle<npuGraph_t, &npuGraphDestroy>;
using GraphExecHandle = UniqueHandle<npuGraphExec_t, &npuGraphExecDestroy>;

// Ends the capture begun on `stream` and returns its graph (throws
// npurt::Error on failure).
inline GraphHandle endCapture(npuStream_t stream) {
  npuGraph_t graph = nullptr;
  check(npuStreamEndCapture(stream, &graph));
  return GraphHandle(graph);
}

// Instantiates `graph` (throws npurt::Error on failure).
inline GraphExecHandle instantiate(npuGraph_t graph) {
  npuGraphExec_t exec = nullptr;
  check(npuGraphInstantiate(&exec, graph, 0));
  return GraphExecHandle(exec);
}

// RAII switch of the calling thread's current device (restores on exit, also
// when an exception unwinds).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(npuGetDevice(&previous_));
    check(npuSetDevice(device));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { (void)npuSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace npurt
