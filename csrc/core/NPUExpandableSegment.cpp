// Expandable segments: the segment itself over npurt's virtual memory, and
// how a device's cache grows and shrinks them. See Note [Expandable
// segments] in NPUExpandableSegment.h.
#include "core/NPUExpandableSegment.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

constexpr size_t kAggregate = kAggregateStat;

npuMemAllocationProp propOf(c10::DeviceIndex device) {
  npuMemAllocationProp prop{};
  prop.type = npuMemAllocationTypePinned;
  prop.location.type = npuMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

}  // namespace

// ---------------------------------------------------------------------------
// ExpandableSegment
// ---------------------------------------------------------------------------

ExpandableSegment::ExpandableSegment(c10::DeviceIndex device, size_t pageSize, size_t pages)
    : device_(device), pageSize_(pageSize), handles_(pages, nullptr) {
  NPU_CHECK(npuMemAddressReserve(&ptr_, pageSize * pages, 0, nullptr, 0));
}

ExpandableSegment::~ExpandableSegment() {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (handles_[i] != nullptr) (void)unmap(i, i + 1);
  }
  (void)npuMemAddressFree(ptr_, size());
}

npuError_t ExpandableSegment::map(size_t first, size_t last,
                                  std::vector<npuMemGenericAllocationHandle_t>& cache) {
  const npuMemAllocationProp prop = propOf(device_);
  for (size_t i = first; i < last; ++i) {
    npuMemGenericAllocationHandle_t handle = nullptr;
    npuError_t status = npuSuccess;
    if (!cache.empty()) {
      handle = cache.back();
      cache.pop_back();
    } else {
      status = npuMemCreate(&handle, pageSize_, &prop, 0);
    }
    if (status == npuSuccess) {
      status = npuMemMap(ptr() + i * pageSize_, pageSize_, 0, handle, 0);
      if (status != npuSuccess) (void)npuMemRelease(handle);
    }
    if (status != npuSuccess) {
      (void)unmap(first, i);  // all or nothing, and the memory released: the device is full
      return status;
    }
    handles_[i] = handle;
  }
  return npuSuccess;
}

npuError_t ExpandableSegment::unmap(size_t first, size_t last,
                                    std::vector<npuMemGenericAllocationHandle_t>* cache) {
  npuError_t firstError = npuSuccess;
  for (size_t i = first; i < last; ++i) {
    npuError_t status = npuMemUnmap(ptr() + i * pageSize_, pageSize_);
    if (status == npuSuccess) {
      if (cache != nullptr) {
        cache->push_back(handles_[i]);  // reserved by the caller: cannot throw
      } else {
        status = npuMemRelease(handles_[i]);
      }
      handles_[i] = nullptr;
    }
    if (status != npuSuccess && firstError == npuSuccess) firstError = status;
  }
  return firstError;
}

// ---------------------------------------------------------------------------
// Growth
// ---------------------------------------------------------------------------

bool DeviceState::useExpandable(const BlockPool& pool, const AllocatorConfig& config) const {
  return config.expandableSegments &&
         (pool.owner == nullptr || pool.owner->options.allocator == nullptr);
}

Block* DeviceState::findExpandableBlock(BlockPool& pool, c10::StreamId stream, size_t size,
                                        const AllocatorConfig& config) {
  auto usable = [](const Block* b) {
    return b != nullptr && (b->state == BlockState::kCached || b->state == BlockState::kUnmapped);
  };
  for (Block* u : pool.unmapped) {
    if (u->stream != stream) continue;
    Block* start = usable(u->prev) ? u->prev : u;
    size_t bytes = 0;
    for (Block* b = start; bytes < size && usable(b); b = b->next) bytes += b->size;
    if (bytes >= size) return start;  // the lowest address: the set is by (stream, address)
  }
  // Addresses for 9/8 of the capacity, as torch_npu: room to map pages
  // elsewhere when some early in the segment were unmapped.
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device_));
  const size_t capacity = prop.totalMemory;
  // The large pool's page follows large_segment_size_mb / segment_size_mb,
  // as torch_npu's; a segment keeps the page it was made with.
  const size_t page = pool.isSmall ? kSmallBuffer : config.expandableLargePageSize();
  const size_t pages = (capacity + capacity / 8 + page - 1) / page;
  if (size > pages * page) return nullptr;  // more than a whole segment could map
  auto segment = std::make_unique<ExpandableSegment>(device_, page, pages);
  Block* block = newBlock(stream, segment->size(), segment->ptr(), &pool);
  block->segment = segment.get();
  block->state = BlockState::kUnmapped;
  expandable_.push_back(std::move(segment));
  pool.unmapped.insert(block);
  updateStat(stats_.segment, statTypes(pool), 1);
  if (pool.owner != nullptr) ++pool.owner->segments;
  return block;
}

Block* DeviceState::mapBlock(Block* block, size_t size, const AllocatorConfig& config,
                             const Context& context) {
  ExpandableSegment& segment = *block->segment;
  const size_t page = segment.pageSize();
  const size_t bytes = (size + page - 1) / page * page;  // <= block->size: both are whole pages
  if (config.throwOnMallocOom) rejectOverConfiguredFraction(bytes, config);
  const int64_t reserved = stats_.reserved_bytes[kAggregate].current;
  if (allowedMaximum_.has_value() && static_cast<size_t>(reserved) + bytes > *allowedMaximum_) {
    return nullptr;  // the per-process fraction, as for a new segment
  }
  const size_t first = static_cast<size_t>(static_cast<char*>(block->ptr) - segment.ptr()) / page;
  // Kept pages serve only segments with pages of their size.
  std::vector<npuMemGenericAllocationHandle_t> none;
  auto& kept = block->pool->freePhysicalPageSize == page ? block->pool->freePhysical : none;
  const npuError_t status = segment.map(first, first + bytes / page, kept);
  if (status == npuErrorMemoryAllocation) return nullptr;
  NPU_CHECK(status);
  BlockPool& pool = *block->pool;
  pool.unmapped.erase(block);
  if (bytes < block->size) {  // the rest stays unmapped: block -> rest -> next
    void* restPtr = static_cast<char*>(block->ptr) + bytes;
    Block* rest = newBlock(block->stream, block->size - bytes, restPtr, &pool);
    rest->segment = block->segment;
    rest->state = BlockState::kUnmapped;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = bytes;
    pool.unmapped.insert(rest);
  }
  ++stats_.num_device_alloc;
  updateStat(stats_.reserved_bytes, statTypes(pool), static_cast<int64_t>(bytes));
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    if (keepsBlockContexts() && block->prev == nullptr) block->segmentContext = context;
    recordTrace("segment_map", device_, reinterpret_cast<uintptr_t>(block->ptr), bytes,
                block->stream, context, RecordContext::kAlloc, poolId(pool));
  }
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->state != BlockState::kCached) continue;
    leavePool(neighbour);
    mergeInto(block, neighbour);
  }
  enterPool(block);
  return block;
}

Block* DeviceState::tryAllocateExpandable(BlockPool& pool, c10::StreamId stream, size_t size,
                                          const AllocatorConfig& config, const Context& context) {
  Block* block = findExpandableBlock(pool, stream, size, config);
  if (block == nullptr) return nullptr;
  // block -> (unmapped | free) ... with room for `size`, block the lowest.
  if (block->state == BlockState::kUnmapped) {
    block = mapBlock(block, std::min(block->size, size), config, context);
    if (block == nullptr) return nullptr;
  }
  while (block->size < size) {  // free -> unmapped: map more behind it
    Block* next = block->next;
    TORCH_INTERNAL_ASSERT(next != nullptr && next->state == BlockState::kUnmapped,
                          "expandable segment lost its room");
    block = mapBlock(next, std::min(size - block->size, next->size), config, context);
    if (block == nullptr) return nullptr;
  }
  leavePool(block);
  block->gcAge = 0;
  return block;
}

// ---------------------------------------------------------------------------
// Shrinking
// ---------------------------------------------------------------------------

void DeviceState::rekey(Block* block, void* ptr) {
  auto node = blocks_.extract(block->ptr);
  block->ptr = ptr;
  node.key() = ptr;
  blocks_.insert(std::move(node));
}

npuError_t DeviceState::unmapBlock(Block* block, bool keepPhysical) {
  ExpandableSegment& segment = *block->segment;
  const size_t page = segment.pageSize();
  const auto base = reinterpret_cast<uintptr_t>(segment.ptr());
  const auto begin = reinterpret_cast<uintptr_t>(block->ptr);
  const uintptr_t end = begin + block->size;
  const size_t first = (begin - base + page - 1) / page;
  const size_t last = (end - base) / page;
  if (first >= last) return npuSuccess;  // no whole page
  BlockPool& pool = *block->pool;
  // The pool keeps pages of one size only (those kept first).
  if (!pool.freePhysical.empty() && pool.freePhysicalPageSize != page) keepPhysical = false;
  if (keepPhysical) {
    pool.freePhysicalPageSize = page;
    pool.freePhysical.reserve(pool.freePhysical.size() + (last - first));
  }
  if (const npuError_t status = segment.unmap(first, last, keepPhysical ? &pool.freePhysical : nullptr);
      status != npuSuccess) {
    return status;
  }
  leavePool(block);
  const uintptr_t unmappedBegin = base + first * page;
  const uintptr_t unmappedEnd = base + last * page;
  rekey(block, reinterpret_cast<void*>(unmappedBegin));
  block->size = unmappedEnd - unmappedBegin;
  block->state = BlockState::kUnmapped;
  // The partial pages at either end stay mapped, as free blocks.
  auto keepMapped = [&](uintptr_t p, size_t bytes, Block* prev, Block* next) {
    Block* piece = newBlock(block->stream, bytes, reinterpret_cast<void*>(p), &pool);
    piece->segment = block->segment;
    piece->segmentContext = block->segmentContext;
    piece->prev = prev;
    piece->next = next;
    if (prev != nullptr) prev->next = piece;
    if (next != nullptr) next->prev = piece;
    enterPool(piece);
  };
  if (unmappedBegin > begin) keepMapped(begin, unmappedBegin - begin, block->prev, block);
  if (end > unmappedEnd) keepMapped(unmappedEnd, end - unmappedEnd, block, block->next);
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->state != BlockState::kUnmapped) continue;
    pool.unmapped.erase(neighbour);
    mergeInto(block, neighbour);
  }
  pool.unmapped.insert(block);
  ++stats_.num_device_free;
  updateStat(stats_.reserved_bytes, statTypes(pool), -static_cast<int64_t>(unmappedEnd - unmappedBegin));
  if (historyOn()) [[unlikely]] {  // Note [Memory history]
    recordTrace("segment_unmap", device_, unmappedBegin, unmappedEnd - unmappedBegin, block->stream,
                nullptr, RecordContext::kAll, poolId(pool));
  }
  return npuSuccess;
}

npuError_t DeviceState::releaseCachedPhysical() {
  npuError_t firstError = npuSuccess;
  std::vector<BlockPool*> pools = {&small_, &large_};
  for (auto& [id, pool] : privatePools_) pools.insert(pools.end(), {&pool->small, &pool->large});
  for (BlockPool* pool : pools) {
    for (npuMemGenericAllocationHandle_t handle : pool->freePhysical) {
      const npuError_t status = npuMemRelease(handle);
      if (status != npuSuccess && firstError == npuSuccess) firstError = status;
    }
    pool->freePhysical.clear();
  }
  return firstError;
}

void DeviceState::releaseEmptyExpandableSegments() {
  for (auto it = expandable_.begin(); it != expandable_.end();) {
    auto found = blocks_.find((*it)->ptr());
    Block* head = found == blocks_.end() ? nullptr : found->second.get();
    if (head == nullptr || head->state != BlockState::kUnmapped || head->next != nullptr) {
      ++it;
      continue;
    }
    BlockPool& pool = *head->pool;
    pool.unmapped.erase(head);
    updateStat(stats_.segment, statTypes(pool), -1);
    if (pool.owner != nullptr) --pool.owner->segments;
    dropBlock(head->ptr);
    it = expandable_.erase(it);  // gives the addresses back
  }
}

}  // namespace c10_npu::NPUCachingAllocator::detail
