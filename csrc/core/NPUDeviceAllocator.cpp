// The caching allocator as PyTorch sees it: a c10::DeviceAllocator
// registered for PrivateUse1 (so torch.accelerator.memory_* work on npu), and
// the public functions of NPUCachingAllocator.h.
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "core/NPUBaseAllocation.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUPluggableAllocator.h"
#include "core/NPUTrace.h"
#include "core/graphs/CaptureRegistry.h"
#include "core/logging/Loggers.h"
#include "npurt/npurt.hpp"

namespace c10_npu::NPUCachingAllocator {
namespace detail {

// Deleters run inside destructors and must not throw: a block whose free
// fails (only possible once the runtime is shutting down) is left to the
// process's exit.
void rawDelete(void* ptr) noexcept {
  if (ptr == nullptr) return;
  Block* block = allocator().ptrs().take(ptr);
  if (block == nullptr) {
    // A pointer this allocator never handed out (or freed twice): a broken
    // invariant of the caller. Leave the memory alone rather than corrupt it.
    std::fprintf(stderr, "NPU caching allocator: free of unknown pointer %p ignored\n", ptr);
    return;
  }
  trace::memoryFreed(ptr);  // Note [Trace hooks]
  try {
    allocator().device(block->device).free(block);
  } catch (...) {
    // The runtime shut down under us (process exit): nothing to return to.
  }
}

namespace {

// Set by the first allocation: from then on the caching allocator counts as
// initialized and cannot be swapped for a pluggable one (torch_npu's rule).
std::atomic<bool> used{false};

struct Callbacks {
  std::mutex mutex;
  std::vector<FreeMemoryCallback> list;
  std::vector<std::shared_ptr<OutOfMemoryObserver>> observers;
};

Callbacks& callbacks() {
  static auto* c = std::make_unique<Callbacks>().release();  // leaked: used by frees at exit
  return *c;
}

}  // namespace

bool cachingAllocatorUsed() noexcept { return used.load(std::memory_order_acquire); }

void runFreeMemoryCallbacks(c10::DeviceIndex device) {
  std::vector<FreeMemoryCallback> list;
  {
    std::lock_guard<std::mutex> lock(callbacks().mutex);
    list = callbacks().list;
  }
  for (FreeMemoryCallback callback : list) callback(device);
}

void runOutOfMemoryObservers(c10::DeviceIndex device, size_t nbytes) noexcept {
  std::vector<std::shared_ptr<OutOfMemoryObserver>> observers;
  {
    std::lock_guard<std::mutex> lock(callbacks().mutex);
    observers = callbacks().observers;
  }
  if (observers.empty()) return;
  npuDeviceProp prop{};
  (void)npuGetDeviceProperties(&prop, device);  // zeros if it fails: still worth reporting
  for (const auto& observer : observers) {
    try {
      (*observer)(device, static_cast<int64_t>(nbytes), static_cast<int64_t>(prop.totalMemory),
                  static_cast<int64_t>(prop.freeMemory));
    } catch (const std::exception& e) {
      try {
        TORCH_WARN("An out-of-memory observer raised (ignored): ", e.what());
      } catch (...) {  // a throwing warning handler: nothing more to report with
      }
    }
  }
}

}  // namespace detail

namespace {

using detail::allocator;
using detail::Block;
using detail::DeviceState;

c10::DeviceIndex currentDevice() {
  int device = 0;
  NPU_CHECK(npuGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

class NPUDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    return NPUCachingAllocator::allocate(nbytes, currentDevice());
  }
  c10::DeleterFnPtr raw_deleter() const override {
    // Note [Pluggable allocators]: the switch happens before any allocation
    // of ours, so every raw pointer handed out since belongs to the new one.
    return NPUPluggableAllocator::current() != nullptr ? NPUPluggableAllocator::deleter()
                                                       : &detail::rawDelete;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) return;
    // npuMemcpy does not wait for streams; like cudaMemcpy (which waits for
    // the legacy default stream), make the copy see the work queued so far.
    device_synchronize(currentDevice());
    NPU_CHECK(npuMemcpy(dest, src, count, npuMemcpyDeviceToDevice));
  }
  // The allocator needs no initialisation of its own: devices are set up
  // lazily by their first allocation.
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id) override {
    NPUCachingAllocator::emptyCache(mempool_id);
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    NPUCachingAllocator::recordStream(ptr, NPUStream(stream));
  }
  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return NPUCachingAllocator::getDeviceStats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    NPUCachingAllocator::resetAccumulatedStats(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    NPUCachingAllocator::resetPeakStats(device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return memGetInfo(device);
  }
};

// Leaked: c10 keeps the pointer until process exit.
NPUDeviceAllocator* deviceAllocator() {
  static NPUDeviceAllocator* instance = std::make_unique<NPUDeviceAllocator>().release();
  return instance;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, deviceAllocator())

Block* blockOf(const c10::DataPtr& ptr) {
  if (ptr.get() == nullptr || ptr.get_deleter() != &detail::rawDelete) return nullptr;
  Block* block = allocator().ptrs().find(ptr.get());
  TORCH_INTERNAL_ASSERT(block != nullptr, "DataPtr ", ptr.get(),
                        " has the npu caching allocator's deleter but is not allocated; "
                        "was it freed through raw_deallocate while still owned?");
  return block;
}

}  // namespace

c10::DeviceAllocator* get() { return deviceAllocator(); }

c10::DataPtr allocate(size_t nbytes, c10::DeviceIndex device) {
  return allocateOnStream(nbytes, getCurrentNPUStream(checkedDeviceIndex(device)));
}

c10::DataPtr allocateOnStream(size_t nbytes, const NPUStream& stream) {
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    return NPUPluggableAllocator::allocate(*pluggable, nbytes, stream);
  }
  if (!detail::used.load(std::memory_order_relaxed)) [[unlikely]] {
    detail::used.store(true, std::memory_order_release);
  }
  c10::DataPtr ptr = allocator().device(stream.device_index()).allocate(nbytes, stream);
  trace::memoryAllocated(ptr.get());  // Note [Trace hooks]
  return ptr;
}

void* rawAlloc(size_t nbytes, const NPUStream& stream) {
  c10::DataPtr ptr = allocateOnStream(nbytes, stream);
  void* raw = ptr.get();
  // The block is owned by the caller from here (rawDelete); the DataPtr must
  // not free it.
  (void)ptr.release_context();
  return raw;
}

void rawDelete(void* ptr) {
  if (ptr == nullptr) return;
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    TORCH_CHECK(pluggable->owns(ptr), "caching_allocator_delete: ", ptr,
                " is not a live allocation of the current NPUPluggableAllocator", NPU_ERROR_SUFFIX);
    NPUPluggableAllocator::deleter()(ptr);
    return;
  }
  TORCH_CHECK(allocator().ptrs().find(ptr) != nullptr, "caching_allocator_delete: ", ptr,
              " is not a live allocation of the npu caching allocator", NPU_ERROR_SUFFIX);
  detail::rawDelete(ptr);
}

void recordStream(const c10::DataPtr& ptr, NPUStream stream) {
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    if (ptr.get() == nullptr || !pluggable->owns(ptr.get())) return;
    trace::streamRecorded(ptr.get(), stream);    // Note [Trace hooks]
    pluggable->recordStream(ptr.get(), stream);  // Note [Pluggable allocator hooks]
    return;
  }
  // Not ours (nullptr, from_blob, ...): nothing to protect, as CUDA does.
  Block* block = blockOf(ptr);
  if (block == nullptr) return;
  allocator().device(block->device).recordStream(block, stream);
  trace::streamRecorded(ptr.get(), stream);  // Note [Trace hooks]
}

bool isAllocatedOn(const c10::DataPtr& ptr, const NPUStream& stream) {
  const Block* block = blockOf(ptr);
  // device and stream are immutable while the block is allocated.
  return block != nullptr && block->device == stream.device_index() && block->stream == stream.id();
}

bool aliasableByTask(const c10::DataPtr& ptr, const NPUStream& stream) {
  Block* block = blockOf(ptr);
  // device and stream are immutable while the block is allocated.
  if (block == nullptr || block->device != stream.device_index()) return false;
  if (block->stream == stream.id()) return true;
  // See Note [Tasks on other streams record their use].
  if (stream.isExternal() || graphs::recorderOf(stream) != nullptr || graphs::isCapturing(stream)) {
    return false;
  }
  allocator().device(block->device).recordTaskUse(block, stream);
  return true;
}

void eraseStream(const c10::DataPtr& ptr, NPUStream stream) {
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    if (ptr.get() == nullptr || !pluggable->owns(ptr.get())) return;
    pluggable->eraseStream(ptr.get(), stream);  // Note [Pluggable allocator hooks]
    trace::streamErased(ptr.get(), stream);     // Note [Trace hooks]
    return;
  }
  Block* block = blockOf(ptr);
  if (block == nullptr) return;
  allocator().device(block->device).eraseStream(block, stream);
  trace::streamErased(ptr.get(), stream);  // Note [Trace hooks]
}

void emptyCache(c10::MempoolId_t pool) {
  detail::ReleaseRequest request;
  if (pool.first != 0 || pool.second != 0) request.onlyPool = pool;
  TORCH_NPU_LOGI(npu_logging::kMemoryLogger, "emptyCache: mempool_id={%llu, %llu}",
                 static_cast<unsigned long long>(pool.first),
                 static_cast<unsigned long long>(pool.second));
  for (const auto& state : allocator().devices()) state->releaseCached(request);
  TORCH_NPU_LOGI(npu_logging::kMemoryLogger, "emptyCache success.");
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) {
    pluggable->emptyCache();
  }
}

void emptyVirtAddrCache() {
  TORCH_CHECK(allocatorConfig().expandableSegments,
              "Unsupported config for empty_virt_addr_cache, please enable expandable_segments.",
              NPU_ERROR_SUFFIX);
  detail::ReleaseRequest request;
  request.keepPhysical = true;
  for (const auto& state : allocator().devices()) state->releaseCached(request);
}

void registerFreeMemoryCallback(FreeMemoryCallback callback) {
  TORCH_CHECK(callback != nullptr, "registerFreeMemoryCallback: null callback", NPU_ERROR_SUFFIX);
  std::lock_guard<std::mutex> lock(detail::callbacks().mutex);
  detail::callbacks().list.push_back(callback);
}

void attachOutOfMemoryObserver(OutOfMemoryObserver observer) {
  TORCH_CHECK_VALUE(observer != nullptr, "attachOutOfMemoryObserver: null observer",
                    NPU_ERROR_SUFFIX);
  auto shared = std::make_shared<OutOfMemoryObserver>(std::move(observer));
  std::lock_guard<std::mutex> lock(detail::callbacks().mutex);
  detail::callbacks().observers.push_back(std::move(shared));
}

DeviceStats getDeviceStats(c10::DeviceIndex device) {
  DeviceState& state = allocator().device(device);  // validates the index
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) {
    return pluggable->deviceStats(device);
  }
  return state.stats();
}

int64_t getOomRejections(c10::DeviceIndex device) {
  return allocator().device(device).oomRejections();
}

void resetPeakStats(c10::DeviceIndex device) {
  DeviceState& state = allocator().device(device);
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) {
    pluggable->resetPeakStats(device);
    return;
  }
  state.resetPeak();
}

void resetAccumulatedStats(c10::DeviceIndex device) {
  DeviceState& state = allocator().device(device);
  if (NPUPluggableAllocator::current() != nullptr) {
    TORCH_WARN_ONCE(
        "NPUPluggableAllocator does not support resetAccumulatedStats: the "
        "statistics come from the user's allocator");
    return;
  }
  state.resetAccumulated();
}

std::pair<size_t, size_t> memGetInfo(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  (void)allocator().device(device);  // validates the index
  npurt::DeviceGuard guard(device);
  size_t free = 0;
  size_t total = 0;
  NPU_CHECK(npuMemGetInfo(&free, &total));
  return {free, total};
}

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0, "invalid fraction: ", fraction,
                    ". Please set within [0, 1].", NPU_ERROR_SUFFIX);
  DeviceState& state = allocator().device(device);
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) {
    pluggable->setMemoryFraction(fraction, device);
    return;
  }
  state.setMemoryFraction(fraction);
}

double getMemoryFraction(c10::DeviceIndex device) {
  DeviceState& state = allocator().device(device);
  TORCH_CHECK(NPUPluggableAllocator::current() == nullptr,
              "NPUPluggableAllocator does not support get_per_process_memory_fraction: the "
              "current allocator is a user allocator",
              NPU_ERROR_SUFFIX);
  return state.memoryFraction();
}

c10::MempoolId_t newMempoolId() {
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next.fetch_add(1, std::memory_order_relaxed)};  // relaxed: only uniqueness matters
}

void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t id, const PoolOptions& options) {
  allocator().device(device).createOrIncrefPool(id, options);
}

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                         std::function<bool(const NPUStream&)> filter) {
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    // Note [Pluggable allocator hooks]: the user's hook decides; raises if
    // there is none, before the caching allocator counts a use.
    device = checkedDeviceIndex(device);
    auto onHandle = [filter, device](void* handle) {
      const NPUStream current = getCurrentNPUStream(device);
      return current.rawHandle() == static_cast<npuStream_t>(handle) && filter(current);
    };
    pluggable->beginAllocateToPool(device, id, std::move(onHandle));
  }
  allocator().device(device).beginAllocateToPool(id, std::move(filter));
}

void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  allocator().device(device).endAllocateToPool(id);
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    pluggable->endAllocateToPool(checkedDeviceIndex(device), id);
  }
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
  allocator().device(device).releasePool(id);
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    pluggable->releasePool(checkedDeviceIndex(device), id);
  }
}

void* getBaseAllocation(void* ptr, size_t* size) {
  TORCH_CHECK_VALUE(size != nullptr, "getBaseAllocation: size must not be NULL", NPU_ERROR_SUFFIX);
  if (auto* pluggable = NPUPluggableAllocator::current(); pluggable != nullptr) [[unlikely]] {
    return pluggable->baseAllocation(ptr, size);  // Note [Pluggable allocator hooks]
  }
  Block* block = allocator().ptrs().find(ptr);
  TORCH_CHECK(block != nullptr, "getBaseAllocation: ", ptr,
              " is not a live allocation of the npu caching allocator", NPU_ERROR_SUFFIX);
  return allocator().device(block->device).baseAllocation(block, size);
}

int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) {
  return allocator().device(device).poolUseCount(id);
}

}  // namespace c10_npu::NPUCachingAllocator
