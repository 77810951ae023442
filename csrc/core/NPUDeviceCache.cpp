// Allocation, splitting, merging and the statistics they keep, of one device
// (releasing cached memory: NPUDeviceRelease.cpp). See
// Note [Allocator segments and splitting] (NPUBlockPool.h) and, for the
// locks, Note [Allocator lock ordering] (NPUCachingAllocator.cpp).
#include "core/NPUDeviceCache.h"

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/RaceCheck.h"
#include "core/logging/Loggers.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

using c10::CachingAllocator::StatTypes;

constexpr size_t kAggregate = kAggregateStat;

// inactive_split: free pieces of split segments, which cannot be released.
// Not those of expandable segments, whose free pages can (Note [Expandable
// segments]).
bool countsAsInactiveSplit(const Block& block) {
  return block.isSplit() && block.segment == nullptr;
}

}  // namespace

DeviceState::DeviceState(c10::DeviceIndex device) : device_(device) {}

// ---------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------

BlockPool& DeviceState::poolFor(size_t size, const NPUStream& stream) {
  // See Note [Private memory pools]: newest routing first.
  for (auto it = routes_.rbegin(); it != routes_.rend(); ++it) {
    if (!it->second(stream)) continue;
    auto pool = privatePools_.find(it->first);
    if (pool == privatePools_.end()) continue;  // released under an active routing
    return size <= kSmallSize ? pool->second->small : pool->second->large;
  }
  return size <= kSmallSize ? small_ : large_;
}

Block* DeviceState::takeFreeBlock(BlockPool& pool, c10::StreamId stream, size_t size,
                                  const AllocatorConfig& config) {
  if (config.garbageCollectionThreshold > 0.0 && allowedMaximum_.has_value()) {
    for (Block* b : pool.blocks) ++b->gcAge;
  }
  auto it = pool.blocks.lower_bound(PoolLess::Key{stream, size, 0});
  // Expandable segments turned off after some were made: new blocks come
  // from npuMalloc'd segments only, as in CUDA.
  while (!config.expandableSegments && it != pool.blocks.end() && (*it)->stream == stream &&
         (*it)->segment != nullptr) {
    ++it;
  }
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // Oversize blocks (never split) serve only oversize requests, and only
  // when little of them is wasted: CUDA's rule, so that max_split_size
  // bounds fragmentation.
  if (size < config.maxSplitSize && block->size >= config.maxSplitSize) return nullptr;
  if (size >= config.maxSplitSize && block->size >= size + config.maxNonSplitRounding) {
    return nullptr;
  }
  leavePool(block);
  block->gcAge = 0;
  return block;
}

Block* DeviceState::mallocSegment(BlockPool& pool, c10::StreamId stream, size_t size,
                                  const AllocatorConfig& config, const Context& context) {
  const size_t bytes = segmentSize(size, config.largeSegmentSize);
  // Refused before the fraction below can turn it into a retry.
  if (config.throwOnMallocOom) rejectOverConfiguredFraction(bytes, config);
  const int64_t reserved = stats_.reserved_bytes[kAggregate].current;
  if (allowedMaximum_.has_value() && static_cast<size_t>(reserved) + bytes > *allowedMaximum_) {
    return nullptr;  // the per-process fraction is enforced like the capacity
  }
  npurt::DeviceGuard guard(device_);
  npuError_t status = npuSuccess;
  void* ptr = segmentMalloc(pool, stream, bytes, &status);
  if (status == npuErrorMemoryAllocation) return nullptr;
  NPU_CHECK(status);
  ++stats_.num_device_alloc;
  Block* block = newBlock(stream, bytes, ptr, &pool);
  const StatTypes types = statTypes(pool);
  updateStat(stats_.segment, types, 1);
  updateStat(stats_.reserved_bytes, types, static_cast<int64_t>(bytes));
  if (bytes >= config.maxSplitSize) {
    stats_.oversize_segments.increase(1);
    oversizeSegments_.insert(ptr);
  }
  if (pool.owner != nullptr) ++pool.owner->segments;
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    if (keepsBlockContexts()) block->segmentContext = context;
    recordTrace("segment_alloc", device_, reinterpret_cast<uintptr_t>(ptr), bytes, stream, context,
                RecordContext::kAlloc, poolId(pool));
  }
  return block;
}

void DeviceState::splitFor(Block* block, size_t size, const AllocatorConfig& config) {
  const size_t rest = block->size - size;
  const bool noSplit = block->pool->owner != nullptr && block->pool->owner->options.noSplit;
  // Note [Expandable segments]: their blocks split like small ones.
  const bool split =
      !noSplit && (block->pool->isSmall || block->segment != nullptr
                       ? rest >= kMinBlockSize
                       : size < config.maxSplitSize && rest > kSmallSize);
  if (!split) return;
  void* restPtr = static_cast<char*>(block->ptr) + size;
  Block* remainder = newBlock(block->stream, rest, restPtr, block->pool);
  remainder->segment = block->segment;
  remainder->segmentContext = block->segmentContext;
  remainder->prev = block;
  remainder->next = block->next;
  if (block->next != nullptr) block->next->prev = remainder;
  block->next = remainder;
  block->size = size;
  enterPool(remainder);
}

void* DeviceState::baseAllocation(const Block* block, size_t* size) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(block->segment == nullptr,
              "Tensors allocated with expandable_segments:True cannot be shared between "
              "processes. Consider using expandable_segments:False in data loading workers via "
              "torch.npu.memory._set_allocator_settings('expandable_segments:False')",
              NPU_ERROR_SUFFIX);
  while (block->prev != nullptr) block = block->prev;  // the segment's first block
  void* base = block->ptr;
  size_t bytes = 0;
  for (; block != nullptr; block = block->next) bytes += block->size;
  *size = bytes;
  return base;
}

// Note [Allocations in the profiler]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.profiler.profile(profile_memory=True) learns of device memory through
// c10::reportMemoryUsageToProfiler, as from CUDA's allocator: every block
// handed out and every free (at the request, as CUDA: the block's events may
// still be pending) with the block's size and the device's allocated and
// reserved bytes after it, for Device(PrivateUse1, device). key_averages'
// device memory columns, the memory profiler and _memory_viz read these. The
// profiler's state is thread-local (the calling thread's profiling session);
// off, the call finds no state and returns, one thread-local load. Lock held:
// the profiler's side only appends to its own buffer and takes no lock of
// ours.
void DeviceState::reportToProfiler(const Block* block, int64_t bytes) const {
  c10::reportMemoryUsageToProfiler(block->ptr, bytes,
                                   static_cast<size_t>(stats_.allocated_bytes[kAggregate].current),
                                   static_cast<size_t>(stats_.reserved_bytes[kAggregate].current),
                                   c10::Device(c10::DeviceType::PrivateUse1, device_));
}

void DeviceState::markAllocated(Block* block, size_t requested, const AllocatorConfig& config,
                                const Context& context) {
  block->state = BlockState::kAllocated;
  block->requested = requested;
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    if (keepsBlockContexts()) block->context = context;
    recordTrace("alloc", device_, reinterpret_cast<uintptr_t>(block->ptr), block->size,
                block->stream, context, RecordContext::kAlloc, poolId(*block->pool));
  }
  const StatTypes types = statTypes(*block->pool);
  const auto size = static_cast<int64_t>(block->size);
  updateStat(stats_.allocation, types, 1);
  updateStat(stats_.allocated_bytes, types, size);
  updateStat(stats_.active, types, 1);
  updateStat(stats_.active_bytes, types, size);
  updateStat(stats_.requested_bytes, types, static_cast<int64_t>(requested));
  block->oversize = block->size >= config.maxSplitSize;
  if (block->oversize) stats_.oversize_allocations.increase(1);
  reportToProfiler(block, size);
  TORCH_NPU_LOGD(npu_logging::kMemoryLogger,
                 "PTA CachingAllocator malloc: malloc = %zu, cached = %lld, allocated = %lld",
                 block->size, static_cast<long long>(stats_.reserved_bytes[kAggregate].current),
                 static_cast<long long>(stats_.allocated_bytes[kAggregate].current));
}

Block* DeviceState::tryAllocate(size_t size, const NPUStream& stream,
                                const AllocatorConfig& config, const Context& context) {
  BlockPool& pool = poolFor(size, stream);
  Block* block = takeFreeBlock(pool, stream.id(), size, config);
  if (block == nullptr) {
    block = useExpandable(pool, config)
                ? tryAllocateExpandable(pool, stream.id(), size, config, context)
                : mallocSegment(pool, stream.id(), size, config, context);
  }
  if (block != nullptr) splitFor(block, size, config);
  return block;
}

bool DeviceState::gcNeeded(size_t nextSegment, const AllocatorConfig& config) const {
  if (config.garbageCollectionThreshold <= 0.0 || !allowedMaximum_.has_value()) return false;
  const auto reserved = static_cast<double>(stats_.reserved_bytes[kAggregate].current);
  return reserved + static_cast<double>(nextSegment) >
         config.garbageCollectionThreshold * static_cast<double>(*allowedMaximum_);
}

c10::DataPtr DeviceState::allocate(size_t nbytes, const NPUStream& stream) {
  const c10::Device dev(c10::DeviceType::PrivateUse1, device_);
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &rawDelete, dev);
  TORCH_CHECK_WITH(OutOfMemoryError, nbytes < kOneExaByte,
                   "NPU out of memory. Tried to allocate more than 1EB memory.", NPU_ERROR_SUFFIX);
  const AllocatorConfig config = allocatorConfig();
  const size_t size = roundSize(nbytes, config.roundupPower2Divisions);
  // Note [Memory history]: the stack is gathered before any lock.
  const Context context =
      historyOn() ? historyContext(RecordContext::kState) : Context();

  processPending(/*synchronize=*/false);
  Block* block = nullptr;
  std::optional<size_t> gcTarget;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    applyConfiguredFraction(config);
    const size_t segment = segmentSize(size, config.largeSegmentSize);
    if (gcNeeded(segment, config)) {
      const double target =
          config.garbageCollectionThreshold * static_cast<double>(*allowedMaximum_);
      gcTarget = static_cast<size_t>(std::max(0.0, target - static_cast<double>(segment)));
      block = takeFreeBlock(poolFor(size, stream), stream.id(), size, config);
      if (block != nullptr) splitFor(block, size, config);
    } else {
      block = tryAllocate(size, stream, config, context);
    }
    if (block != nullptr) markAllocated(block, nbytes, config, context);
  }
  if (block == nullptr && gcTarget.has_value()) {
    // Garbage collection: give back the segments unused the longest before
    // the reserved memory crosses the threshold.
    releaseCached(ReleaseRequest{std::nullopt, gcTarget});
    std::lock_guard<std::mutex> lock(mutex_);
    block = tryAllocate(size, stream, config, context);
    if (block != nullptr) markAllocated(block, nbytes, config, context);
  }
  // Pools that opted in (MemPool(use_on_oom=True)) serve before anything is
  // released, as in torch_npu.
  if (block == nullptr) block = allocateFromOomPools(size, nbytes, stream, config, context);
  if (block == nullptr) {
    // Out of memory: free what queued work holds (Note [Memory held by
    // queued tasks]), give every cached segment of this device back (pending
    // blocks once their events completed) and retry once.
    runFreeMemoryCallbacks(device_);
    releaseCached(ReleaseRequest{});
    std::string message;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.num_alloc_retries;
      block = tryAllocate(size, stream, config, context);
      if (block != nullptr) {
        markAllocated(block, nbytes, config, context);
      } else {
        ++stats_.num_ooms;
        if (historyOn()) [[unlikely]] {  // CUDA's device_free: what the device has left
          const auto reserved = static_cast<size_t>(stats_.reserved_bytes[kAggregate].current);
          recordTrace("oom", device_, totalMemory_ - std::min(totalMemory_, reserved), nbytes,
                      stream.id(), context, RecordContext::kState);
        }
        message = oomMessage(nbytes, segmentSize(size, config.largeSegmentSize));
      }
    }
    if (block == nullptr) {
      runOutOfMemoryObservers(device_, nbytes);  // unlocked: observers may take the GIL
      // INFO, not torch_npu's ERROR: the exception carries the same text.
      TORCH_NPU_LOGI(npu_logging::kMemoryLogger, "%s", message.c_str());
      TORCH_CHECK_WITH(OutOfMemoryError, false, message, NPU_ERROR_SUFFIX);
    }
  }
  allocator().ptrs().insert(block);
  // The block's new owner is ordered after its old ones by the rules above
  // (same stream, or the events of the cross-stream rule): the race detector
  // forgets its history (Note [Happens-before model] in
  // csrc/npurt/src/racecheck/racecheck.h).
  if (racecheck::enabled()) [[unlikely]]
    (void)npuRaceCheckResetRange(block->ptr, block->size);
  return c10::DataPtr(block->ptr, block->ptr, &rawDelete, dev);
}

// ---------------------------------------------------------------------------
// Free, merge
// ---------------------------------------------------------------------------

void DeviceState::enterPool(Block* block) {
  block->state = BlockState::kCached;
  block->generation = nextGeneration_++;
  sparePoolNodes_.insertInto(block->pool->blocks, block);
  if (countsAsInactiveSplit(*block)) {
    const StatTypes types = statTypes(*block->pool);
    updateStat(stats_.inactive_split, types, 1);
    updateStat(stats_.inactive_split_bytes, types, static_cast<int64_t>(block->size));
  }
}

void DeviceState::leavePool(Block* block) {
  sparePoolNodes_.eraseFrom(block->pool->blocks, block);
  if (countsAsInactiveSplit(*block)) {
    const StatTypes types = statTypes(*block->pool);
    updateStat(stats_.inactive_split, types, -1);
    updateStat(stats_.inactive_split_bytes, types, -static_cast<int64_t>(block->size));
  }
}

void DeviceState::mergeInto(Block* dst, Block* src) {
  // `src` is a cached neighbour of `dst`, already out of its pool.
  if (src == dst->prev) {
    auto node = blocks_.extract(dst->ptr);  // dst's key changes to src's address
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
    dst->size += src->size;
    dropBlock(src->ptr);
    node.key() = dst->ptr;
    blocks_.insert(std::move(node));
  } else {
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
    dst->size += src->size;
    dropBlock(src->ptr);
  }
}

void DeviceState::freeBlock(Block* block) {
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    recordTrace("free_completed", device_, reinterpret_cast<uintptr_t>(block->ptr), block->size,
                block->stream, nullptr, RecordContext::kAll, poolId(*block->pool));
  }
  block->context.reset();
  const StatTypes types = statTypes(*block->pool);
  updateStat(stats_.active, types, -1);
  updateStat(stats_.active_bytes, types, -static_cast<int64_t>(block->size));
  updateStat(stats_.requested_bytes, types, -static_cast<int64_t>(block->requested));
  block->requested = 0;
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->state != BlockState::kCached) continue;
    leavePool(neighbour);
    mergeInto(block, neighbour);
  }
  enterPool(block);
}

Block* DeviceState::newBlock(c10::StreamId stream, size_t size, void* ptr, BlockPool* pool) {
  BlockMap::node_type node = spareBlocks_.take();
  if (node.empty()) {
    auto owned = std::make_unique<Block>(device_, stream, size, ptr, pool);
    Block* block = owned.get();
    blocks_.emplace(ptr, std::move(owned));
    return block;
  }
  Block* block = node.mapped().get();
  *block = Block(device_, stream, size, ptr, pool);
  node.key() = ptr;
  blocks_.insert(std::move(node));
  return block;
}

void DeviceState::dropBlock(void* ptr) {
  BlockMap::node_type node = blocks_.extract(ptr);
  if (node.empty()) return;
  // A kept Block holds nothing: the stacks it may point to are freed now.
  *node.mapped() = Block(device_, 0, 0, nullptr, nullptr);
  spareBlocks_.keep(std::move(node));
}

}  // namespace c10_npu::NPUCachingAllocator::detail
