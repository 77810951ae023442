// Private memory pools of the caching allocator: the mechanism a graph
// capture and torch.npu.MemPool route allocations with, and the pools'
// options (own segment allocator, use on out-of-memory). See Note [Private
// memory pools] in NPUBlockPool.h.
#include <c10/util/Exception.h>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"
#include "core/NPUPluggableAllocator.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

void checkId(c10::MempoolId_t id) {
  TORCH_CHECK(id.first != 0 || id.second != 0,
              "Expected a private memory pool id, but got (0, 0), the id of the default pools",
              NPU_ERROR_SUFFIX);
}

}  // namespace

void DeviceState::createOrIncrefPool(c10::MempoolId_t id, const PoolOptions& options) {
  checkId(id);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = privatePools_.find(id);
  if (it == privatePools_.end()) {
    privatePools_.emplace(id, std::make_unique<PrivatePool>(id, options));
  } else {
    // A pool whose count reached zero but still holds segments is revived:
    // its blocks are still its own.
    ++it->second->useCount;
  }
}

void DeviceState::beginAllocateToPool(c10::MempoolId_t id,
                                      std::function<bool(const NPUStream&)> filter) {
  TORCH_CHECK(filter != nullptr, "beginAllocateToPool needs a stream filter", NPU_ERROR_SUFFIX);
  createOrIncrefPool(id, PoolOptions{});
  std::lock_guard<std::mutex> lock(mutex_);
  routes_.emplace_back(id, std::move(filter));
}

void DeviceState::endAllocateToPool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = routes_.rbegin(); it != routes_.rend(); ++it) {
    if (it->first == id) {
      routes_.erase(std::next(it).base());
      return;
    }
  }
  TORCH_CHECK(false, "endAllocateToPool: no allocation to memory pool (", id.first, ", ", id.second,
              ") is underway on device ", static_cast<int>(device_), NPU_ERROR_SUFFIX);
}

void DeviceState::releasePool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = privatePools_.find(id);
  TORCH_CHECK(it != privatePools_.end() && it->second->useCount > 0, "releasePool: memory pool (",
              id.first, ", ", id.second, ") is not in use on device ", static_cast<int>(device_),
              NPU_ERROR_SUFFIX);
  --it->second->useCount;
  if (it->second->useCount == 0 && it->second->segments == 0) privatePools_.erase(it);
}

Block* DeviceState::allocateFromOomPools(size_t size, size_t requested, const NPUStream& stream,
                                         const AllocatorConfig& config, const Context& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Allocations routed to a private pool do not spill into other pools.
  if (poolFor(size, stream).owner != nullptr) return nullptr;
  for (auto& [id, pool] : privatePools_) {
    // A pool nobody uses any more (its MemPool deleted) is no fallback.
    if (!pool->options.useOnOom || pool->useCount == 0) continue;
    Block* block =
        takeFreeBlock(size <= kSmallSize ? pool->small : pool->large, stream.id(), size, config);
    if (block == nullptr) continue;
    splitFor(block, size, config);
    markAllocated(block, requested, config, context);
    return block;
  }
  return nullptr;
}

void* DeviceState::segmentMalloc(const BlockPool& pool, c10::StreamId stream, size_t bytes,
                                 npuError_t* status) {
  const auto& custom = pool.owner != nullptr ? pool.owner->options.allocator : nullptr;
  void* ptr = nullptr;
  if (custom == nullptr) {
    *status = npuMalloc(&ptr, bytes);
    return ptr;
  }
  ptr = custom->allocSegment(bytes, device_, streamHandle(stream));
  *status = ptr != nullptr ? npuSuccess : npuErrorMemoryAllocation;
  return ptr;
}

npuError_t DeviceState::segmentFree(const Block& segment) {
  const auto& custom =
      segment.pool->owner != nullptr ? segment.pool->owner->options.allocator : nullptr;
  if (custom == nullptr) return npuFree(segment.ptr);
  custom->freeSegment(segment.ptr, segment.size, device_, streamHandle(segment.stream));
  return npuSuccess;
}

npuStream_t DeviceState::streamHandle(c10::StreamId stream) const {
  try {
    return NPUStream::unpack3(stream, device_, c10::DeviceType::PrivateUse1).rawHandle();
  } catch (const c10::Error&) {
    return nullptr;  // a destroyed external stream: the allocator gets the default stream
  }
}

int DeviceState::poolUseCount(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = privatePools_.find(id);
  return it == privatePools_.end() ? 0 : it->second->useCount;
}

}  // namespace c10_npu::NPUCachingAllocator::detail
