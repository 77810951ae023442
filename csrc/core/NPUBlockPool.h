// Blocks, segments and pools of the device caching allocator. Private
// header of csrc/core (not part of the public API).
//
// Note [Allocator segments and splitting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As in PyTorch's CUDA allocator: memory comes from npurt in segments (one
// npuMalloc each) and is handed out in blocks carved from them.
//  - Every request is rounded up to a multiple of 512 B, or to a
//    power-of-two size class with roundup_power2_divisions (roundSize, Note
//    [Power-of-two size classes] in NPUAllocatorConfig.cpp); that rounded
//    size is what allocated_bytes counts; requested_bytes counts the bytes
//    asked for.
//  - Requests of at most 1 MiB are "small" and come from 2 MiB segments;
//    larger ones are "large" and come from 20 MiB segments when under 10 MiB,
//    else from a segment of their own size rounded up to 2 MiB
//    (segmentSize). Small and large blocks live in separate pools.
//  - A free block larger than the request is split when the rest is worth
//    keeping (shouldSplit): any rest >= 512 B in the small pool, a rest
//    > 1 MiB in the large pool, never for blocks of max_split_size or more.
//  - A freed block merges with free (cached) neighbours of its segment; a
//    neighbour that is allocated or still awaiting other streams' events
//    (pending) is left alone. All blocks of a segment share its allocation
//    stream, so the reuse rule (Note [Allocator cross-stream reuse rule])
//    holds for every piece.
//  - Only whole free segments go back to npurt (empty_cache, the
//    out-of-memory retry, garbage collection); a free piece of a split
//    segment is "inactive_split" memory, which cannot be released.
//  - With expandable_segments:True, segments grow instead (Note [Expandable
//    segments] in NPUExpandableSegment.h): their blocks split like small
//    ones, and their free whole pages can be released.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "core/NPUAllocatorConfig.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "npurt/npurt.hpp"
#include "npurt/npurt_vmm.h"

namespace c10_npu::NPUCachingAllocator::detail {

constexpr size_t kMinBlockSize = 512;              // every size is a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20;     // largest "small" request
constexpr size_t kSmallBuffer = size_t{2} << 20;   // segment of the small pool
constexpr size_t kLargeBuffer = size_t{20} << 20;  // segment for requests < kMinLargeAlloc
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kRoundLarge = size_t{2} << 20;  // larger segments are rounded to this
// torch_npu refuses requests of 1 EiB or more before touching the device.
constexpr size_t kOneExaByte = size_t{1} << 60;

// Rounded block size of a request (see Note [Allocator segments and
// splitting]) under `divisions` (AllocatorConfig::roundupPower2Divisions);
// nbytes < kOneExaByte. Pure.
size_t roundSize(size_t nbytes,
                 const std::array<size_t, kRoundupPower2Intervals>& divisions);
// Size of the segment to npuMalloc for a block of rounded size `size`;
// largeSegment: the segment of requests below kMinLargeAlloc
// (large_segment_size_mb, kLargeBuffer by default). Pure.
size_t segmentSize(size_t size, size_t largeSegment);

// A runtime event recorded directly with npurt (not through the task queue).
// See Note [Allocator events on external streams] in NPUStreamUses.cpp.
// Shared: the destroy callback records one event on a dying stream for every
// block that used it.
class RawEvent {
 public:
  // Records a new event on `handle`. Non-blocking; raises if npurt refuses.
  static std::shared_ptr<RawEvent> recordOn(npuStream_t handle);
  bool query() const;        // raises if the event failed
  void synchronize() const;  // raises if the event failed

 private:
  npurt::EventHandle handle_;
};

// A stream other than the allocation stream that used a live block: named by
// Tensor.record_stream, or by a task queued there that reads or writes the
// block (Note [Tasks on other streams record their use]), or both.
struct StreamUse {
  NPUStream stream;
  npuStream_t externalHandle = nullptr;  // raw handle if external, resolved at recordStream
  bool byTask = false;                   // erase_stream leaves the use in place
};

enum class BlockState : uint8_t {
  kAllocated,  // owned by a DataPtr
  kFreeing,    // in the free path, between its two locked phases
  kPending,    // freed; waits for its events
  kCached,     // free, in its pool
  kLeaked,     // an event could not be recorded: never reused (stays reserved)
  kUnmapped,   // addresses of an expandable segment with nothing mapped (pool's `unmapped`)
};

struct BlockPool;
class ExpandableSegment;  // NPUExpandableSegment.h

// A piece of a segment. All fields are guarded by the device mutex, except
// the events of a kPending block taken out of the pending list by
// processPending (then the taking thread alone touches them) and the
// immutable device/stream.
struct Block {
  Block(c10::DeviceIndex d, c10::StreamId s, size_t sz, void* p, BlockPool* pl)
      : device(d), stream(s), size(sz), ptr(p), pool(pl) {}
  // device, stream and pool are fixed while the block exists; they are not
  // const so that a recycled Block can be assigned afresh (Note [Allocator
  // bookkeeping is recycled] in NodeStash.h).
  c10::DeviceIndex device;
  c10::StreamId stream;   // allocation stream of its segment
  size_t size;            // bytes of this piece (a multiple of kMinBlockSize)
  size_t requested = 0;   // bytes asked for, while allocated
  void* ptr;              // start of this piece
  BlockPool* pool;        // the pool it returns to
  Block* prev = nullptr;  // neighbours in the segment (nullptr at its ends)
  Block* next = nullptr;
  BlockState state = BlockState::kAllocated;
  uint64_t generation = 0;  // device-unique, new each time it enters the pool
  int gcAge = 0;            // allocations since it entered the pool (garbage collection)
  bool oversize = false;    // allocated while size >= max_split_size (oversize_allocations)
  // The expandable segment it is a piece of (Note [Expandable segments]);
  // nullptr for a segment of one npuMalloc.
  ExpandableSegment* segment = nullptr;
  std::vector<StreamUse> uses;                       // recordStream'd streams
  std::vector<std::shared_ptr<RawEvent>> rawEvents;  // direct records
  std::vector<NPUEvent> queuedEvents;                // records through the task queue
  // Note [Memory history] (NPUMemoryHistory.h): the stack of the block's
  // allocation while allocated, and of its segment's creation (every piece
  // of a segment holds it). Null while history is off.
  std::shared_ptr<c10::GatheredContext> context;
  std::shared_ptr<c10::GatheredContext> segmentContext;

  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

// Pool order: allocation stream, then size, then address (unique key).
struct PoolLess {
  using is_transparent = void;
  using Key = std::tuple<c10::StreamId, size_t, uintptr_t>;
  static Key key(const Block* b) {
    return {b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr)};
  }
  bool operator()(const Block* a, const Block* b) const { return key(a) < key(b); }
  bool operator()(const Block* a, const Key& b) const { return key(a) < b; }
  bool operator()(const Key& a, const Block* b) const { return a < key(b); }
};

// Order of unmapped blocks: allocation stream, then address (the lowest
// address of a stream first, Note [Expandable segments]).
struct UnmappedLess {
  static std::pair<c10::StreamId, uintptr_t> key(const Block* b) {
    return {b->stream, reinterpret_cast<uintptr_t>(b->ptr)};
  }
  bool operator()(const Block* a, const Block* b) const { return key(a) < key(b); }
};

struct PrivatePool;

// The free (kCached) blocks of one size class of one owner, and the
// unmapped (kUnmapped) address ranges of its expandable segments.
struct BlockPool {
  BlockPool(bool small, PrivatePool* ownerPool) : isSmall(small), owner(ownerPool) {}
  std::set<Block*, PoolLess> blocks;
  std::set<Block*, UnmappedLess> unmapped;
  // Physical pages unmapped by empty_virt_addr_cache, for the next maps of
  // segments with pages of freePhysicalPageSize bytes (page sizes change
  // with large_segment_size_mb; a segment keeps the size it was made with).
  std::vector<npuMemGenericAllocationHandle_t> freePhysical;
  size_t freePhysicalPageSize = 0;
  const bool isSmall;
  PrivatePool* const owner;  // nullptr for the device's default pools
};

// Note [Private memory pools]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A private pool (CUDA's graph pools; torch.npu.MemPool) owns its segments:
// its blocks are handed only to allocations routed to it, never to others,
// and its segments are never used for the default pools. Allocations are
// routed to a pool while a filter registered with beginAllocateToPool
// accepts the allocating stream (a graph capture: the capturing stream;
// use_mem_pool: the calling thread); filters are searched newest first.
// A pool lives while its use count is positive (each MemPool object, each
// beginAllocateToPool, each graph sharing it holds one); at zero its free
// segments are released by the next empty_cache or out-of-memory retry, and
// the pool disappears once it holds no segment. Blocks still allocated from
// it keep it alive and return to it when freed. Its PoolOptions may give it
// its own segment allocator, make it a fallback of out-of-memory allocations
// elsewhere (use_on_oom) or forbid splitting.
struct PrivatePool {
  PrivatePool(c10::MempoolId_t pid, PoolOptions opts)
      : id(pid), options(std::move(opts)), small(true, this), large(false, this) {}
  const c10::MempoolId_t id;
  const PoolOptions options;
  int useCount = 1;
  int64_t segments = 0;  // npuMalloc'd segments it owns
  BlockPool small;
  BlockPool large;
};

// The id of a pool's owner; {0, 0} for the default pools.
inline c10::MempoolId_t poolId(const BlockPool& pool) {
  return pool.owner != nullptr ? pool.owner->id : c10::MempoolId_t{0, 0};
}

// Index of the aggregate in a c10 StatArray.
constexpr size_t kAggregateStat = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// Adds `delta` to the stats of `types`. Caller holds the device lock.
inline void updateStat(c10::CachingAllocator::StatArray& stat,
                       const c10::CachingAllocator::StatTypes& types, int64_t delta) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (!types[i]) continue;
    if (delta >= 0) {
      stat[i].increase(static_cast<size_t>(delta));
    } else {
      stat[i].decrease(static_cast<size_t>(-delta));
    }
  }
}

// c10 stat indices of a pool: the aggregate and its size class.
inline c10::CachingAllocator::StatTypes statTypes(const BlockPool& pool) {
  c10::CachingAllocator::StatTypes types{};
  types[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(pool.isSmall ? c10::CachingAllocator::StatType::SMALL_POOL
                                         : c10::CachingAllocator::StatType::LARGE_POOL)] = true;
  return types;
}

}  // namespace c10_npu::NPUCachingAllocator::detail
