// Private memory pools of the caching allocator: the mechanism a graph
// capture and torch.npu.MemPool route allocations with. See Note [Private
// memory pools] in NPUBlockPool.h.
#include <c10/util/Exception.h>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

void checkId(c10::MempoolId_t id) {
  TORCH_CHECK(id.first != 0 || id.second != 0,
              "Expected a private memory pool id, but got (0, 0), the id of the default pools",
              NPU_ERROR_SUFFIX);
}

}  // namespace

void DeviceState::createOrIncrefPool(c10::MempoolId_t id) {
  checkId(id);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = privatePools_.find(id);
  if (it == privatePools_.end()) {
    privatePools_.emplace(id, std::make_unique<PrivatePool>(id));
  } else {
    // A pool whose count reached zero but still holds segments is revived:
    // its blocks are still its own.
    ++it->second->useCount;
  }
}

void DeviceState::beginAllocateToPool(c10::MempoolId_t id,
                                      std::function<bool(const NPUStream&)> filter) {
  TORCH_CHECK(filter != nullptr, "beginAllocateToPool needs a stream filter", NPU_ERROR_SUFFIX);
  createOrIncrefPool(id);
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

int DeviceState::poolUseCount(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = privatePools_.find(id);
  return it == privatePools_.end() ? 0 : it->second->useCount;
}

}  // namespace c10_npu::NPUCachingAllocator::detail
