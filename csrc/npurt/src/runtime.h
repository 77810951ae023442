// The process-wide runtime: configuration, devices, handle registries,
// memory, trace, debug knobs, destroy callbacks, and shutdown.
//
// Note [Runtime lifetime]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Runtime::instance() builds the runtime on the first npurt call (a
// function-local static, so concurrent first calls are serialised by the
// compiler) and never destroys it: the object is created by make_unique and
// deliberately release()d into a static pointer. Executor threads, other
// libraries' static destructors and thread-local destructors may all call
// into npurt during process exit, in an order no destructor could respect;
// with a leaked runtime they find a live object whose state says "shut down"
// (npuErrorRuntimeShutdown) instead of a destroyed one. What must happen at
// exit — stopping and joining the executors, discarding queued work, writing
// the trace — is done by an atexit hook, installed by the constructor; see
// Note [Shutdown order] in csrc/npurt/README.md. The memory stays reachable
// through the static pointer, so leak checkers do not report it.
//
// Thread safety: every member function is thread-safe. Devices and the
// registries are created in the constructor and never change shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "event.h"
#include "executor.h"
#include "handle_registry.h"
#include "memory.h"
#include "vmm/virtual_memory.h"
#include "npurt/npurt.h"
#include "stream.h"
#include "trace.h"

namespace npurt::internal {

class Graph;      // graph/graph.h
class GraphExec;  // graph/exec.h

// One simulated device.
class Device {
 public:
  Device(int index, int cores, size_t capacity, Trace& trace,
         const std::atomic<uint32_t>& globalDelayUs);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int index() const noexcept { return index_; }
  size_t capacity() const noexcept { return capacity_; }
  // Bytes currently allocated (relaxed: a statistic and a limit).
  size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::atomic<size_t>& usedCounter() noexcept { return used_; }
  Executor& executor() noexcept { return executor_; }

  // Adds a new stream (and drops streams that are destroyed, drained and
  // have no unreported failure).
  void addStream(std::shared_ptr<Stream> stream);
  // Every stream of the device: live ones and destroyed ones still draining
  // or holding an unreported failure (npuDeviceSynchronize waits for them).
  std::vector<std::shared_ptr<Stream>> streams() const;
  // Drops destroyed streams that are idle and hold no failure.
  void prune();
  // Shutdown: discards all queued work of every stream (executors stopped).
  void discardAllForShutdown() noexcept;

 private:
  void pruneLocked();

  const int index_;
  const size_t capacity_;
  std::atomic<size_t> used_{0};
  Executor executor_;
  mutable std::mutex streamsMutex_;               // guards streams_
  std::vector<std::shared_ptr<Stream>> streams_;  // see streams()
};

// Note [Fork]: true in the forked child of a process whose runtime was up.
// Thread-safe; needs no runtime.
bool inBadFork() noexcept;

// True once Runtime's constructor has started (successfully or not), so the
// environment it reads is frozen. Never builds the runtime. Thread-safe.
bool runtimeStarted() noexcept;

class Runtime {
 public:
  // The runtime; see Note [Runtime lifetime]. Thread-safe.
  static Runtime& instance();

  // Use instance(); public only for make_unique.
  Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Gate of every entry point: npuSuccess, or the sticky initialisation
  // error, or npuErrorRuntimeShutdown (message set, prefixed by function).
  npuError_t admit(const char* function) const noexcept {
    // acquire: pairs with shutdown()'s store (and the constructor's), so a
    // call that sees kReady also sees fully built devices.
    if (state_.load(std::memory_order_acquire) == kReady) [[likely]]
      return npuSuccess;
    return admitSlow(function);
  }

  // True once the exit hook has begun (Note [Shutdown order]).
  bool shutDown() const noexcept { return state_.load(std::memory_order_acquire) == kShutdown; }

  const Config& config() const noexcept { return config_; }
  int deviceCount() const noexcept { return static_cast<int>(devices_.size()); }
  bool validDevice(int device) const noexcept { return device >= 0 && device < deviceCount(); }
  Device& device(int index) noexcept { return *devices_[static_cast<size_t>(index)]; }
  // The calling thread's current device (npuSetDevice); thread-local.
  static int& currentDevice() noexcept;

  HandleRegistry<Stream> streams{kStreamTag};
  HandleRegistry<Event> events{kEventTag};
  HandleRegistry<Graph> graphs{kGraphTag};              // npuGraph_t
  HandleRegistry<GraphExec> graphExecs{kGraphExecTag};  // npuGraphExec_t
  // npuEventRecordDeferred's versions, until npuEventCompleteDeferred.
  HandleRegistry<EventRecordTask> deferredRecords{kDeferredTag};
  MemoryManager memory;
  VirtualMemory vm;  // npuMemAddressReserve & co. (Note [Virtual memory])
  Trace trace;
  std::atomic<uint32_t> globalDelayUs{0};  // npuSetTaskDelay; relaxed everywhere

  // Stream-destroy callbacks (npuRegisterStreamDestroyCallback).
  uint64_t addDestroyCallback(npuStreamDestroyCallback_t callback, void* userData);
  bool removeDestroyCallback(uint64_t handle);
  // Calls every registered callback on this thread, with no runtime lock held.
  void runDestroyCallbacks(npuStream_t stream, int device);

  // The atexit hook's body; see Note [Shutdown order]. Idempotent.
  void shutdown() noexcept;

  // Note [Fork] in csrc/npurt/README.md. Called in the child of a fork by
  // the pthread_atfork handler (the child is single-threaded then): makes
  // every later call fail with npuErrorInitializationError and the exit hook
  // do nothing.
  void markForkedChild() noexcept;

 private:
  enum State : int { kReady, kInitFailed, kShutdown, kForked };

  npuError_t admitSlow(const char* function) const noexcept;

  std::atomic<int> state_{kReady};
  Config config_;
  std::string initError_;  // set once in the constructor if kInitFailed
  std::vector<std::unique_ptr<Device>> devices_;

  struct DestroyCallback {
    uint64_t handle;
    npuStreamDestroyCallback_t callback;
    void* userData;
  };
  std::mutex callbacksMutex_;  // guards callbacks_, nextCallback_
  std::vector<DestroyCallback> callbacks_;
  uint64_t nextCallback_ = 1;
};

}  // namespace npurt::internal
