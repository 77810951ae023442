// User-supplied device allocators. See Note [Pluggable allocators] in
// NPUPluggableAllocator.h.
#include "core/NPUPluggableAllocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <utility>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"
#include "core/NPUTrace.h"

namespace c10_npu::NPUPluggableAllocator {
namespace {

struct Current {
  std::mutex mutex;
  std::shared_ptr<PluggableAllocator> owner;  // never reset: the switch is one-way
  std::atomic<PluggableAllocator*> raw{nullptr};
};

Current& currentState() {
  static auto* c = std::make_unique<Current>().release();  // leaked: frees run at exit
  return *c;
}

// Deleters run in destructors and must not throw.
void deleteCurrent(void* ptr) noexcept {
  if (ptr == nullptr) return;
  PluggableAllocator* allocator = current();
  if (allocator == nullptr) return;
  trace::memoryFreed(ptr);  // Note [Trace hooks]
  try {
    allocator->free(ptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "NPUPluggableAllocator: free of %p failed: %s\n", ptr, e.what());
  }
}

}  // namespace

PluggableAllocator::PluggableAllocator(AllocFn allocFn, FreeFn freeFn)
    : alloc_(allocFn), free_(freeFn) {
  TORCH_CHECK_VALUE(allocFn != nullptr, "NPUPluggableAllocator: the alloc function is NULL",
                    NPU_ERROR_SUFFIX);
  TORCH_CHECK_VALUE(freeFn != nullptr, "NPUPluggableAllocator: the free function is NULL",
                    NPU_ERROR_SUFFIX);
}

void* PluggableAllocator::malloc(size_t size, c10::DeviceIndex device, npuStream_t stream) {
  void* ptr = alloc_(size, device, stream);
  if (ptr == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  live_[ptr] = Allocation{size, device, stream};
  return ptr;
}

void PluggableAllocator::free(void* ptr) {
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    TORCH_CHECK(it != live_.end(), "NPUPluggableAllocator: trying to free ", ptr,
                ", which this allocator did not allocate (or freed already)", NPU_ERROR_SUFFIX);
    a = it->second;
    live_.erase(it);
  }
  free_(ptr, a.size, a.device, a.stream);
}

void* PluggableAllocator::allocSegment(size_t size, c10::DeviceIndex device, npuStream_t stream) {
  return alloc_(size, device, stream);
}

void PluggableAllocator::freeSegment(void* ptr, size_t size, c10::DeviceIndex device,
                                     npuStream_t stream) {
  free_(ptr, size, device, stream);
}

bool PluggableAllocator::owns(const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.count(const_cast<void*>(ptr)) != 0;
}

void PluggableAllocator::setDeviceStatsFn(DeviceStatsFn fn) { deviceStatsFn_.store(fn); }

void PluggableAllocator::setResetPeakStatsFn(ResetPeakStatsFn fn) { resetPeakStatsFn_.store(fn); }

void PluggableAllocator::setInitFn(InitFn fn) { initFn_.store(fn); }

void PluggableAllocator::setResetFn(ResetFn fn) { resetFn_.store(fn); }

void PluggableAllocator::setMemoryFractionFn(MemoryFractionFn fn) { memoryFractionFn_.store(fn); }

void PluggableAllocator::setBaseAllocFn(BaseAllocFn fn) { baseAllocFn_.store(fn); }

void PluggableAllocator::setRecordStreamFn(StreamUseFn fn) { recordStreamFn_.store(fn); }

void PluggableAllocator::setEraseStreamFn(StreamUseFn fn) { eraseStreamFn_.store(fn); }

void PluggableAllocator::setBeginAllocateToPoolFn(BeginAllocateToPoolFn fn) {
  beginAllocateToPoolFn_.store(fn);
}

void PluggableAllocator::setEndAllocateToPoolFn(PoolFn fn) { endAllocateToPoolFn_.store(fn); }

void PluggableAllocator::setReleasePoolFn(PoolFn fn) { releasePoolFn_.store(fn); }

void* PluggableAllocator::baseAllocation(void* ptr, size_t* size) {
  if (BaseAllocFn fn = baseAllocFn_.load(); fn != nullptr) return fn(ptr, size);
  return ptr;
}

void PluggableAllocator::recordStream(void* ptr, const NPUStream& stream) {
  if (StreamUseFn fn = recordStreamFn_.load(); fn != nullptr) fn(ptr, stream);
}

void PluggableAllocator::eraseStream(void* ptr, const NPUStream& stream) {
  if (StreamUseFn fn = eraseStreamFn_.load(); fn != nullptr) fn(ptr, stream);
}

void PluggableAllocator::beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                                             StreamFilter filter) {
  BeginAllocateToPoolFn fn = beginAllocateToPoolFn_.load();
  TORCH_CHECK(fn != nullptr,
              "Private memory pools (graph capture, use_mem_pool) need the caching allocator or a "
              "begin_allocate_to_pool hook, but the current allocator is an "
              "NPUPluggableAllocator (change_current_allocator) without one; set it with "
              "set_begin_allocate_to_pool, or give the allocator to a MemPool instead",
              NPU_ERROR_SUFFIX);
  fn(device, id, std::move(filter));
}

void PluggableAllocator::endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  if (PoolFn fn = endAllocateToPoolFn_.load(); fn != nullptr) fn(device, id);
}

void PluggableAllocator::releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
  if (PoolFn fn = releasePoolFn_.load(); fn != nullptr) fn(device, id);
}

c10::CachingDeviceAllocator::DeviceStats PluggableAllocator::deviceStats(c10::DeviceIndex device) {
  if (DeviceStatsFn fn = deviceStatsFn_.load(); fn != nullptr) return fn(device);
  TORCH_WARN_ONCE(
      "NPUPluggableAllocator: no get_device_stats function was set "
      "(set_get_device_stats_fn), so memory statistics are reported as zero.");
  return {};
}

void PluggableAllocator::resetPeakStats(c10::DeviceIndex device) {
  if (ResetPeakStatsFn fn = resetPeakStatsFn_.load(); fn != nullptr) {
    fn(device);
    return;
  }
  TORCH_WARN_ONCE(
      "NPUPluggableAllocator: no reset_peak_status function was set (set_reset_peak_status_fn); "
      "peak statistics were not reset.");
}

void PluggableAllocator::emptyCache() {
  if (ResetFn fn = resetFn_.load(); fn != nullptr) fn(/*checkError=*/true);
}

void PluggableAllocator::setMemoryFraction(double fraction, c10::DeviceIndex device) {
  MemoryFractionFn fn = memoryFractionFn_.load();
  TORCH_CHECK(fn != nullptr,
              "NPUPluggableAllocator: set_per_process_memory_fraction needs a memory fraction "
              "function (set_memory_fraction_fn)",
              NPU_ERROR_SUFFIX);
  fn(fraction, device);
}

void PluggableAllocator::init(int deviceCount) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (initialized_) return;
    initialized_ = true;
  }
  if (InitFn fn = initFn_.load(); fn != nullptr) fn(deviceCount);
}

bool PluggableAllocator::initialized() {
  std::lock_guard<std::mutex> lock(mutex_);
  return initialized_;
}

PluggableAllocator* current() noexcept {
  return currentState().raw.load(std::memory_order_acquire);
}

std::shared_ptr<PluggableAllocator> currentShared() {
  Current& c = currentState();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.owner;
}

void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator, int deviceCount) {
  TORCH_CHECK_VALUE(allocator != nullptr, "change_current_allocator: the allocator is None",
                    NPU_ERROR_SUFFIX);
  Current& c = currentState();
  std::lock_guard<std::mutex> lock(c.mutex);
  TORCH_CHECK(c.owner == nullptr && !NPUCachingAllocator::detail::cachingAllocatorUsed(),
              "Can't swap an already initialized allocator: the current npu allocator "
              "has served allocations already (call change_current_allocator before any npu "
              "tensor is created)",
              NPU_ERROR_SUFFIX);
  allocator->init(deviceCount);
  c.owner = std::move(allocator);
  c.raw.store(c.owner.get(), std::memory_order_release);
}

c10::DataPtr allocate(PluggableAllocator& allocator, size_t nbytes, const NPUStream& stream) {
  const c10::Device device(c10::DeviceType::PrivateUse1, stream.device_index());
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &deleteCurrent, device);
  void* ptr = allocator.malloc(nbytes, stream.device_index(), stream.rawHandle());
  TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "NPU out of memory. Tried to allocate ",
                   NPUCachingAllocator::detail::formatSize(nbytes), " (NPU ",
                   static_cast<int>(stream.device_index()),
                   "): the NPUPluggableAllocator's alloc function returned NULL",
                   NPU_ERROR_SUFFIX);
  trace::memoryAllocated(ptr);  // Note [Trace hooks]
  return c10::DataPtr(ptr, ptr, &deleteCurrent, device);
}

c10::DeleterFnPtr deleter() noexcept { return &deleteCurrent; }

}  // namespace c10_npu::NPUPluggableAllocator
