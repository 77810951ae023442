// Runtime singleton, devices, destroy callbacks and shutdown.
// See Note [Runtime lifetime] in runtime.h.
#include "runtime.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "clock.h"
#include "errors.h"
#include "fault.h"
#include "racecheck/racecheck.h"

namespace npurt::internal {
namespace {

void shutdownHook() { Runtime::instance().shutdown(); }

// The runtime once it is up, for the fork handler (which must not build it).
std::atomic<Runtime*> gInitialised{nullptr};
// Set as the runtime's constructor starts, before it reads the environment:
// from then on npuProbeDeviceCount asks the runtime instead of the
// environment (Note [Device count before initialisation]).
std::atomic<bool> gStarted{false};
// Note [Fork]: set in the child of a parent whose runtime was up.
std::atomic<bool> gInBadFork{false};

// pthread_atfork child handler. Takes no lock and allocates nothing: the
// child has one thread, and locks other parent threads held stay held.
void forkChild() {
  Runtime* const runtime = gInitialised.load(std::memory_order_relaxed);
  if (runtime == nullptr) return;  // never initialised: the child may use npurt
  gInBadFork.store(true, std::memory_order_relaxed);
  runtime->markForkedChild();
}

}  // namespace

bool inBadFork() noexcept { return gInBadFork.load(std::memory_order_relaxed); }

bool runtimeStarted() noexcept { return gStarted.load(std::memory_order_acquire); }

Device::Device(int index, int cores, size_t capacity, Trace& trace,
               const std::atomic<uint32_t>& globalDelayUs)
    : index_(index), capacity_(capacity), executor_(index, cores, trace, globalDelayUs) {}

void Device::addStream(std::shared_ptr<Stream> stream) {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  pruneLocked();
  streams_.push_back(std::move(stream));
}

std::vector<std::shared_ptr<Stream>> Device::streams() const {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  return streams_;
}

void Device::prune() {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  pruneLocked();
}

void Device::pruneLocked() {
  // A destroyed stream is kept while it drains (device synchronize waits for
  // it) and while it holds a failure nobody reported (device synchronize
  // reports it). Executors hold their own references, so dropping ours
  // never frees a stream that is still running.
  std::erase_if(streams_, [](const std::shared_ptr<Stream>& s) {
    return s->destroyed() && s->idle() && !s->hasFailure();
  });
}

void Device::discardAllForShutdown() noexcept {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  for (const std::shared_ptr<Stream>& stream : streams_) {
    // A stream whose executor thread was abandoned in a task is still that
    // thread's to consume: left as it is (Note [Shutdown order]).
    if (executor_.ranByAbandonedWorker(stream.get())) continue;
    stream->discardAllForShutdown();
  }
}

Runtime& Runtime::instance() {
  // Leaked on purpose: see Note [Runtime lifetime].
  static Runtime* const runtime = std::make_unique<Runtime>().release();
  return *runtime;
}

Runtime::Runtime() {
  gStarted.store(true, std::memory_order_release);
  initError_ = loadConfig(config_);
  if (!initError_.empty()) {
    // Sticky: every later call fails the same way.
    state_.store(kInitFailed, std::memory_order_release);
    return;
  }
  globalDelayUs.store(config_.taskDelayUs, std::memory_order_relaxed);
  const size_t capacity = static_cast<size_t>(config_.memoryMb) << 20;
  devices_.reserve(static_cast<size_t>(config_.deviceCount));
  for (int i = 0; i < config_.deviceCount; ++i) {
    devices_.push_back(std::make_unique<Device>(i, config_.cores, capacity, trace, globalDelayUs));
  }
  if (!config_.tracePath.empty()) trace.start();
  if (config_.faultKind >= 0) {
    faults().arm(static_cast<FaultKind>(config_.faultKind), config_.faultNth);  // NPU_SIM_FAULT
  }
  if (config_.raceCheckMode != npuRaceCheckOff) {
    racecheck::setMode(static_cast<npuRaceCheckMode>(config_.raceCheckMode));  // NPU_SIM_RACECHECK
  }
  // Note [Fork]: no prepare or parent handler (nothing to lock); the child
  // handler only flips the state. Registered once per process: a good child
  // that builds its own runtime adds a second, identical, harmless one.
  gInitialised.store(this, std::memory_order_release);
  if (pthread_atfork(nullptr, nullptr, &forkChild) != 0) {
    std::fputs("npurt: warning: pthread_atfork failed; a forked child may hang\n", stderr);
  }
  // Last, once everything the hook touches exists. If registration fails the
  // runtime still works; exit then skips the orderly shutdown (the executor
  // threads die with the process).
  if (std::atexit(&shutdownHook) != 0) {
    std::fputs("npurt: warning: atexit registration failed; no orderly shutdown\n", stderr);
  }
}

int& Runtime::currentDevice() noexcept {
  static thread_local int device = 0;
  return device;
}

void Runtime::markForkedChild() noexcept {
  int expected = kReady;
  // kInitFailed keeps its own message; kShutdown (forked during exit)
  // becomes kForked too: the child's hook must not touch the parent's threads.
  if (!state_.compare_exchange_strong(expected, kForked, std::memory_order_relaxed)) {
    if (expected == kShutdown) state_.store(kForked, std::memory_order_relaxed);
  }
}

npuError_t Runtime::admitSlow(const char* function) const noexcept {
  const int state = state_.load(std::memory_order_acquire);
  if (state == kInitFailed) return fail(npuErrorInitializationError, function, initError_);
  if (state == kForked) {
    return fail(npuErrorInitializationError, function,
                "npurt was initialised in the parent process and cannot be used in a forked "
                "child (its executor threads do not exist here); use the 'spawn' start method");
  }
  return fail(npuErrorRuntimeShutdown, function, "the runtime is shutting down (process exit)");
}

uint64_t Runtime::addDestroyCallback(npuStreamDestroyCallback_t callback, void* userData) {
  std::lock_guard<std::mutex> lock(callbacksMutex_);
  const uint64_t handle = nextCallback_++;
  callbacks_.push_back(DestroyCallback{handle, callback, userData});
  return handle;
}

bool Runtime::removeDestroyCallback(uint64_t handle) {
  std::lock_guard<std::mutex> lock(callbacksMutex_);
  const auto it = std::find_if(callbacks_.begin(), callbacks_.end(),
                               [&](const DestroyCallback& c) { return c.handle == handle; });
  if (it == callbacks_.end()) return false;
  callbacks_.erase(it);
  return true;
}

void Runtime::runDestroyCallbacks(npuStream_t stream, int device) {
  // Copy under the mutex, call without it: a callback may call npurt
  // functions that need it (the contract forbids (un)registering, but a
  // deadlock would be a harsh way to say so).
  std::vector<DestroyCallback> callbacks;
  {
    std::lock_guard<std::mutex> lock(callbacksMutex_);
    callbacks = callbacks_;
  }
  for (const DestroyCallback& c : callbacks) c.callback(stream, device, c.userData);
}

void Runtime::shutdown() noexcept {
  // Note [Shutdown order] in csrc/npurt/README.md, step by step.
  int expected = kReady;
  // 1. Stop accepting work. release: pairs with admit()'s acquire.
  if (!state_.compare_exchange_strong(expected, kShutdown, std::memory_order_acq_rel)) return;
  // 2.-3. Each executor finishes the task it is running; wake and join. A
  //    task still running at the deadline (NPU_SIM_EXIT_TIMEOUT_MS from now,
  //    for all devices together) is abandoned with its thread.
  const uint64_t deadline = nowNs() + config_.exitTimeoutMs * 1'000'000;
  for (const std::unique_ptr<Device>& device : devices_) device->executor().stop(deadline);
  // 4. Discard what is still queued (calling release). Completes pending
  //    event versions too, so no host thread stays blocked on one.
  for (const std::unique_ptr<Device>& device : devices_) device->discardAllForShutdown();
  // 5. The NPU_SIM_TRACE file.
  if (!config_.tracePath.empty()) {
    trace.stop();
    try {
      if (trace.write(config_.tracePath.c_str(), "npurt shutdown") != npuSuccess) {
        std::fprintf(stderr, "npurt: %s\n", lastErrorMessage());
      }
    } catch (...) {
      std::fputs("npurt: writing the trace at exit failed (out of memory)\n", stderr);
    }
  }
}

}  // namespace npurt::internal
