// Releasing a device's cached memory: empty_cache, garbage collection and the
// out-of-memory retry give whole free segments (and the free pages of
// expandable segments) back to npurt, once the streams that last used them
// finished. See Note [Allocator segments and splitting] (NPUBlockPool.h) and,
// for the locks, Note [Allocator lock ordering] (NPUCachingAllocator.cpp).
#include "core/NPUDeviceCache.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <set>

#include "core/NPUException.h"
#include "core/TaskQueue.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

using c10::CachingAllocator::StatTypes;

constexpr size_t kAggregate = kAggregateStat;

}  // namespace

std::vector<std::pair<void*, uint64_t>> DeviceState::releaseCandidates(
    const ReleaseRequest& request) {
  std::vector<BlockPool*> pools;
  if (request.onlyPool.has_value()) {
    auto it = privatePools_.find(*request.onlyPool);
    if (it != privatePools_.end()) pools = {&it->second->small, &it->second->large};
  } else {
    pools = {&small_, &large_};
    if (!request.reserveTarget.has_value()) {
      for (auto& [id, pool] : privatePools_) {
        if (pool->useCount == 0) pools.insert(pools.end(), {&pool->small, &pool->large});
      }
    }
  }
  // Whole free segments, and free blocks of expandable segments (their
  // whole pages are unmapped).
  std::vector<Block*> whole;
  for (BlockPool* pool : pools) {
    for (Block* block : pool->blocks) {
      if (!block->isSplit() || block->segment != nullptr) whole.push_back(block);
    }
  }
  if (request.reserveTarget.has_value()) {
    // Oldest first (most allocations since it was last used), then as many
    // as bring the reserved memory down to the target.
    std::stable_sort(whole.begin(), whole.end(),
                     [](const Block* a, const Block* b) { return a->gcAge > b->gcAge; });
    auto reserved = static_cast<size_t>(stats_.reserved_bytes[kAggregate].current);
    size_t n = 0;
    while (n < whole.size() && reserved > *request.reserveTarget) reserved -= whole[n++]->size;
    whole.resize(n);
  }
  std::vector<std::pair<void*, uint64_t>> snapshot;
  snapshot.reserve(whole.size());
  for (Block* block : whole) snapshot.emplace_back(block->ptr, block->generation);
  return snapshot;
}

void DeviceState::freeSegment(Block* block) {
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    recordTrace("segment_free", device_, reinterpret_cast<uintptr_t>(block->ptr), block->size,
                block->stream, nullptr, RecordContext::kAll, poolId(*block->pool));
  }
  leavePool(block);
  const StatTypes types = statTypes(*block->pool);
  updateStat(stats_.segment, types, -1);
  updateStat(stats_.reserved_bytes, types, -static_cast<int64_t>(block->size));
  ++stats_.num_device_free;
  if (oversizeSegments_.erase(block->ptr) != 0) stats_.oversize_segments.decrease(1);
  if (block->pool->owner != nullptr) --block->pool->owner->segments;
  dropBlock(block->ptr);
}

void DeviceState::releaseCached(const ReleaseRequest& request) {
  processPending(/*synchronize=*/true);
  std::vector<std::pair<void*, uint64_t>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.num_sync_all_streams;
    snapshot = releaseCandidates(request);
  }
  // A cached block may still be used by work queued on its allocation
  // stream before it was freed (stream order makes reuse on that stream safe,
  // not a release), and npuFree, unlike cudaFree, does not wait for tasks.
  // So wait for those streams, through events: a device synchronize would
  // also take (and so lose) the failures of the device's streams.
  if (!snapshot.empty()) waitForStreams(snapshot);
  std::lock_guard<std::mutex> lock(mutex_);
  npuError_t firstError = npuSuccess;
  for (const auto& [ptr, generation] : snapshot) {
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) continue;
    Block* block = it->second.get();
    // Reused, split or merged since the snapshot: the wait above does not
    // cover it (generations are never reused).
    if (block->state != BlockState::kCached || block->generation != generation) continue;
    if (block->segment != nullptr) {
      const npuError_t status = unmapBlock(block, request.keepPhysical);
      if (status != npuSuccess && firstError == npuSuccess) firstError = status;
      continue;
    }
    if (block->isSplit()) continue;
    const npuError_t status = segmentFree(*block);
    if (status != npuSuccess) {
      if (firstError == npuSuccess) firstError = status;
      continue;  // keep the block: it is still ours
    }
    freeSegment(block);
  }
  releaseEmptyExpandableSegments();
  if (!request.keepPhysical) {
    const npuError_t status = releaseCachedPhysical();
    if (firstError == npuSuccess) firstError = status;
  }
  for (auto it = privatePools_.begin(); it != privatePools_.end();) {
    const bool unused = it->second->useCount == 0 && it->second->segments == 0;
    it = unused ? privatePools_.erase(it) : std::next(it);
  }
  NPU_CHECK(firstError);
}

void DeviceState::waitForStreams(std::vector<std::pair<void*, uint64_t>>& snapshot) {
  std::set<c10::StreamId> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [ptr, generation] : snapshot) {
      auto it = blocks_.find(ptr);
      if (it != blocks_.end()) streams.insert(it->second->stream);
    }
  }
  std::set<c10::StreamId> unreachable;
  for (c10::StreamId id : streams) {
    try {
      const NPUStream stream = NPUStream::unpack3(id, device_, c10::DeviceType::PrivateUse1);
      queue::waitSubmitted(stream);
      RawEvent::recordOn(stream.rawHandle())->synchronize();
    } catch (const c10::Error&) {
      unreachable.insert(id);  // e.g. a destroyed external stream: keep its blocks
    }
  }
  if (unreachable.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(snapshot, [&](const std::pair<void*, uint64_t>& entry) {
    auto it = blocks_.find(entry.first);
    return it == blocks_.end() || unreachable.count(it->second->stream) != 0;
  });
}

}  // namespace c10_npu::NPUCachingAllocator::detail
