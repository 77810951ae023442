// Expandable segments of the caching allocator. Private header of csrc/core.
//
// Note [Expandable segments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's (and torch_npu's) expandable_segments:True. Without it, a
// large request the cache cannot serve gets a segment of its own size, and a
// program whose sizes drift (batch N, then N + 1) leaves slivers at the ends
// of old segments that nothing can use. With it, each stream of each pool has
// a segment that grows instead:
//  - A segment reserves addresses for 9/8 of the device's capacity
//    (npuMemAddressReserve) and maps physical memory into them page by page
//    (npuMemCreate + npuMemMap): 2 MiB pages for the small pool, 20 MiB for
//    the large one (large_segment_size_mb or segment_size_mb when set,
//    NPUAllocatorConfig.h; a segment keeps the page it was made with, and
//    physical pages kept by empty_virt_addr_cache serve only segments with
//    pages of their size). Its address range is a chain of blocks like any segment's;
//    the unmapped parts are kUnmapped blocks in the pool's `unmapped` set.
//  - A request no cached block serves looks, on its stream, for the lowest
//    unmapped range that (together with a free block right before it) is big
//    enough, maps the pages it needs there and merges them with that free
//    block; only if there is none is a new segment reserved. So the segment
//    grows at its end and stays one contiguous run of blocks.
//  - Blocks of expandable segments split whenever 512 B or more would be
//    left (CUDA's rule with expandable segments), and are not counted in
//    inactive_split: their free pages can always be given back.
//  - Giving memory back (empty_cache, the out-of-memory retry, garbage
//    collection) unmaps the whole pages inside free blocks, after waiting for
//    the streams that last used them (unmapping, like npuFree, does not wait
//    for the device); a segment with nothing mapped is released.
//  - torch_npu's empty_virt_addr_cache unmaps like empty_cache but keeps the
//    physical pages in the pool (BlockPool::freePhysical) for the next maps;
//    empty_cache and the out-of-memory retry release them. Cached pages still
//    take device memory (mem_get_info) but are not reserved_bytes.
//  - Statistics: reserved_bytes counts mapped bytes; every map is a
//    num_device_alloc, every unmap a num_device_free; `segment` counts the
//    expandable segments (one each, however much is mapped). A snapshot
//    reports each contiguous mapped range as a segment with is_expandable.
//  - The per-process memory fraction and throw_on_npumalloc_oom apply to each
//    map, as they do to each npuMalloc'd segment.
// Pools with their own allocator (Note [Pluggable allocators]) never use
// expandable segments: their memory comes from that allocator.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <vector>

#include "npurt/npurt_vmm.h"

namespace c10_npu::NPUCachingAllocator::detail {

// The address range and physical pages of one expandable segment. Not
// thread-safe: its DeviceState's lock guards it.
class ExpandableSegment {
 public:
  // Reserves addresses for `pages` pages of `pageSize` bytes (a multiple of
  // npurt's granularity) for memory of `device`. Raises if npurt refuses.
  ExpandableSegment(c10::DeviceIndex device, size_t pageSize, size_t pages);
  ExpandableSegment(const ExpandableSegment&) = delete;
  ExpandableSegment& operator=(const ExpandableSegment&) = delete;
  // Unmaps and releases whatever is still mapped and gives the addresses
  // back; never raises.
  ~ExpandableSegment();

  char* ptr() const { return static_cast<char*>(ptr_); }
  size_t size() const { return pageSize_ * handles_.size(); }
  size_t pageSize() const { return pageSize_; }

  // Maps pages [first, last), each unmapped, taking physical pages from
  // `cache` (pages of this segment's size) before creating new ones. A
  // failure (npuErrorMemoryAllocation: the device is full) leaves nothing
  // of them mapped; returns the status.
  npuError_t map(size_t first, size_t last, std::vector<npuMemGenericAllocationHandle_t>& cache);
  // Unmaps pages [first, last), each mapped; their physical memory goes to
  // `cache` if given (empty_virt_addr_cache), else is released. The caller
  // waited for the work that used them. Returns the status.
  npuError_t unmap(size_t first, size_t last,
                   std::vector<npuMemGenericAllocationHandle_t>* cache = nullptr);

 private:
  const c10::DeviceIndex device_;
  void* ptr_ = nullptr;
  const size_t pageSize_;
  // Per page: its physical memory while mapped, else nullptr.
  std::vector<npuMemGenericAllocationHandle_t> handles_;
};

}  // namespace c10_npu::NPUCachingAllocator::detail
