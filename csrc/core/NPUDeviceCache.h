// The per-device state of the caching allocator and the process-wide
// registry of devices. Private header of csrc/core.
//
// Files of the allocator, by concept:
//   NPUBlockPool.h/.cpp       blocks, segments, pools; sizes and splitting rules
//   NPUExpandableSegment.h/.cpp  expandable segments: growth by mapping, shrinking
//   NPUDeviceCache.cpp        allocate, split, merge
//   NPUDeviceRelease.cpp      release of cached segments: empty_cache, garbage
//                             collection, the out-of-memory retry
//   NPUAllocatorStats.cpp     statistics, the memory fraction, the out-of-memory message
//   NPUPrivatePools.cpp       private pools (graph capture, MemPool)
//   NPUCachingAllocator.cpp   frees across streams: pending events, the
//                             lock-ordering Notes, the device registry
//   NPUStreamUses.cpp         which streams use a block: record_stream,
//                             queued tasks, erase_stream, external streams
//   NPUDeviceAllocator.cpp    the c10::DeviceAllocator facade and public functions
//   NPUAllocatorConfig.h/.cpp PYTORCH_NPU_ALLOC_CONF
//   NPUPluggableAllocator.h/.cpp  user allocators (current allocator, pool segments)
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/NPUAllocatorConfig.h"
#include "core/NPUBlockPool.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUExpandableSegment.h"
#include "core/NPUMemoryHistory.h"
#include "core/NodeStash.h"

namespace c10_npu::NPUCachingAllocator::detail {

// The DataPtr deleter of every block (context = data pointer). noexcept.
void rawDelete(void* ptr) noexcept;

// Calls every OutOfMemoryObserver for a failed request of `nbytes` on
// `device`; an observer's exception is warned about, not propagated. Call
// with no allocator lock held. Thread-safe.
void runOutOfMemoryObservers(c10::DeviceIndex device, size_t nbytes) noexcept;

// True once the caching allocator served an allocation (Note [Pluggable
// allocators]). Thread-safe.
bool cachingAllocatorUsed() noexcept;

// Calls every FreeMemoryCallback for `device` (Note [Memory held by queued
// tasks]). Call with no allocator lock held. Thread-safe.
void runFreeMemoryCallbacks(c10::DeviceIndex device);

// --- NPUMemoryHistory.cpp --- Note [Memory history]. All thread-safe.
// True while history is on: the only cost of the hooks while it is off (one
// relaxed load).
bool historyOn() noexcept;
// The calling thread's stack if history keeps stacks for `atLeast`, else
// null. Call with no allocator lock held (it may take the GIL).
std::shared_ptr<c10::GatheredContext> historyContext(RecordContext atLeast);
// True if blocks keep their allocation stacks (RecordContext::kState on).
bool keepsBlockContexts() noexcept;
// Appends a trace entry of `device` if the trace is on; keeps `context` if
// history keeps stacks for `contextFrom`. May be called under a device lock.
// `pool`: the private pool of the block ({0, 0}: the default pools).
void recordTrace(const char* action, c10::DeviceIndex device, uintptr_t address, size_t size,
                 c10::StreamId stream, const std::shared_ptr<c10::GatheredContext>& context,
                 RecordContext contextFrom, c10::MempoolId_t pool = {0, 0}) noexcept;

// "1.50 MiB" style, for messages.
std::string formatSize(uint64_t bytes);

// Which cached segments releaseCached gives back.
struct ReleaseRequest {
  // Default pools and the pools whose use count dropped to zero (empty_cache,
  // the out-of-memory retry); or only the pool with this id.
  std::optional<c10::MempoolId_t> onlyPool;
  // Garbage collection: stop once reserved bytes are at most this many, and
  // take the segments unused the longest first.
  std::optional<size_t> reserveTarget;
  // empty_virt_addr_cache: unmapped pages of expandable segments stay in
  // their pool (Note [Expandable segments]); otherwise they, and those kept
  // before, are released.
  bool keepPhysical = false;
};

class DeviceState {
 public:
  using Context = std::shared_ptr<c10::GatheredContext>;

  explicit DeviceState(c10::DeviceIndex device);

  // --- NPUDeviceCache.cpp ---
  // Allocates from the pool the current stream routes to. Thread-safe.
  c10::DataPtr allocate(size_t nbytes, const NPUStream& stream);
  // --- NPUDeviceRelease.cpp ---
  // Frees whole cached segments (see ReleaseRequest); waits for the streams
  // that last used them first. Takes the lock itself. Thread-safe.
  void releaseCached(const ReleaseRequest& request);

  // --- NPUMemoryHistory.cpp --- Appends this device's segments (by
  // address) to `out`. Thread-safe.
  void snapshotSegments(std::vector<SegmentInfo>& out);

  // --- NPUAllocatorStats.cpp --- (all thread-safe)
  DeviceStats stats();
  int64_t oomRejections();
  void resetPeak();
  void resetAccumulated();
  void setMemoryFraction(double fraction);
  double memoryFraction();

  // --- NPUPrivatePools.cpp --- (all thread-safe)
  void createOrIncrefPool(c10::MempoolId_t id, const PoolOptions& options);
  void beginAllocateToPool(c10::MempoolId_t id, std::function<bool(const NPUStream&)> filter);
  void endAllocateToPool(c10::MempoolId_t id);
  void releasePool(c10::MempoolId_t id);
  int poolUseCount(c10::MempoolId_t id);
  // getBaseAllocation (NPUCachingAllocator.h) of an allocated block.
  void* baseAllocation(const Block* block, size_t* size);

  // --- NPUCachingAllocator.cpp --- (all thread-safe)
  void free(Block* block);
  // Moves pending blocks whose events completed back to their pools; with
  // `synchronize`, waits for all of them. Takes the lock itself.
  void processPending(bool synchronize);

  // --- NPUStreamUses.cpp --- (all thread-safe)
  void recordStream(Block* block, const NPUStream& stream);
  // Note [Tasks on other streams record their use]: `stream` is managed and
  // not the block's own.
  void recordTaskUse(Block* block, const NPUStream& stream);
  void eraseStream(Block* block, const NPUStream& stream);
  // Returns the stream of a use of `handle`, after marking the handle dead.
  std::optional<NPUStream> markStreamDead(npuStream_t handle);
  // Replaces every use of `handle` by `event` (nullptr: the stream was
  // synchronized instead).
  void replaceUses(npuStream_t handle, const std::shared_ptr<RawEvent>& event);

 private:
  // NPUPrivatePools.cpp; takes the lock: a block of a use_on_oom pool,
  // split and marked allocated, for an allocation routed to no private pool.
  Block* allocateFromOomPools(size_t size, size_t requested, const NPUStream& stream,
                              const AllocatorConfig& config, const Context& context);
  // Lock held for all of these.
  BlockPool& poolFor(size_t size, const NPUStream& stream);
  Block* takeFreeBlock(BlockPool& pool, c10::StreamId stream, size_t size,
                       const AllocatorConfig& config);
  // `context`: the allocation's stack for the memory history (may be null).
  Block* mallocSegment(BlockPool& pool, c10::StreamId stream, size_t size,
                       const AllocatorConfig& config, const Context& context);
  Block* tryAllocate(size_t size, const NPUStream& stream, const AllocatorConfig& config,
                     const Context& context);
  void splitFor(Block* block, size_t size, const AllocatorConfig& config);
  // Note [Allocations in the profiler]: reports an allocation (bytes > 0) or
  // a free (bytes < 0) of `block` with the device's totals after it.
  void reportToProfiler(const Block* block, int64_t bytes) const;
  void markAllocated(Block* block, size_t requested, const AllocatorConfig& config,
                     const Context& context);
  void freeBlock(Block* block);  // back to its pool, merged with free neighbours
  void mergeInto(Block* dst, Block* src);
  void enterPool(Block* block);
  void leavePool(Block* block);
  void freeSegment(Block* block);
  // A new block of the device (in blocks_), and the removal of one; both
  // reuse bookkeeping memory (Note [Allocator bookkeeping is recycled] in
  // NodeStash.h).
  Block* newBlock(c10::StreamId stream, size_t size, void* ptr, BlockPool* pool);
  void dropBlock(void* ptr);
  // NPUExpandableSegment.cpp (Note [Expandable segments]), lock held.
  bool useExpandable(const BlockPool& pool, const AllocatorConfig& config) const;
  // A block of at least `size` bytes taken out of `pool`, grown from (or in a
  // new) expandable segment of `stream`; nullptr if out of memory.
  Block* tryAllocateExpandable(BlockPool& pool, c10::StreamId stream, size_t size,
                               const AllocatorConfig& config, const Context& context);
  // The lowest block of `stream` from which free and unmapped blocks reach
  // `size` bytes, in a new segment if needed; nullptr if none can.
  Block* findExpandableBlock(BlockPool& pool, c10::StreamId stream, size_t size,
                             const AllocatorConfig& config);
  // Maps the first `size` bytes (rounded to pages) of the unmapped `block`,
  // merges them with free neighbours into a cached block and returns it;
  // nullptr if out of memory.
  Block* mapBlock(Block* block, size_t size, const AllocatorConfig& config, const Context& context);
  // Unmaps the whole pages of the cached `block`; the rest stays cached.
  // keepPhysical: their memory goes to the pool's freePhysical.
  npuError_t unmapBlock(Block* block, bool keepPhysical);
  // Releases the physical pages every pool keeps (empty_virt_addr_cache's).
  npuError_t releaseCachedPhysical();
  // Releases the expandable segments with nothing mapped.
  void releaseEmptyExpandableSegments();
  // Changes the address of `block`, also in blocks_.
  void rekey(Block* block, void* ptr);
  // NPUPrivatePools.cpp: a segment's memory from npurt or the pool's own
  // allocator (Note [Pluggable allocators]); nullptr with the status on failure.
  void* segmentMalloc(const BlockPool& pool, c10::StreamId stream, size_t bytes,
                      npuError_t* status);
  npuError_t segmentFree(const Block& segment);
  npuStream_t streamHandle(c10::StreamId stream) const;
  // NPUAllocatorStats.cpp: raises torch.OutOfMemoryError (counting
  // num_oom_rejections) if throw_on_npumalloc_oom refuses a segment of `bytes`.
  void rejectOverConfiguredFraction(size_t bytes, const AllocatorConfig& config);
  void applyConfiguredFraction(const AllocatorConfig& config);
  bool gcNeeded(size_t nextSegment, const AllocatorConfig& config) const;
  std::vector<std::pair<void*, uint64_t>> releaseCandidates(const ReleaseRequest& request);
  std::string oomMessage(size_t nbytes, size_t segment);
  // Not locked: waits until the work queued so far on the allocation streams
  // of the snapshot's blocks finished, without reporting their failures;
  // drops the blocks whose stream cannot be reached. Takes the lock itself.
  void waitForStreams(std::vector<std::pair<void*, uint64_t>>& snapshot);

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  using BlockMap = std::unordered_map<void*, std::unique_ptr<Block>>;
  BlockMap blocks_;  // every block of every segment
  // Note [Allocator bookkeeping is recycled] (NodeStash.h): blocks dropped
  // from blocks_ (with their Block), and nodes of the pools' sets.
  NodeStash<BlockMap, 64> spareBlocks_;
  NodeStash<std::set<Block*, PoolLess>, 64> sparePoolNodes_;
  std::unordered_set<void*> oversizeSegments_;  // bases of segments counted in oversize_segments
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_;  // Note [Expandable segments]
  BlockPool small_{true, nullptr};
  BlockPool large_{false, nullptr};
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> privatePools_;
  // Active routings, newest last (see Note [Private memory pools]).
  std::vector<std::pair<c10::MempoolId_t, std::function<bool(const NPUStream&)>>> routes_;
  std::vector<Block*> pending_;  // kPending blocks
  // Whether pending_ may be non-empty: set with every push, cleared when
  // processPending takes the list. Lets processPending skip the lock when
  // nothing is pending (every allocation calls it). Written under mutex_.
  std::atomic<bool> mayHavePending_{false};
  int takenOut_ = 0;                   // processPending calls holding blocks out of pending_
  std::condition_variable pendingCv_;  // signalled when takenOut_ drops
  // External stream handles whose destroy notification arrived; see Note
  // [Allocator events on external streams]. Handles are never reused.
  std::unordered_set<npuStream_t> deadExternal_;
  uint64_t nextGeneration_ = 1;
  size_t totalMemory_ = 0;                // device capacity, read at construction
  std::optional<size_t> allowedMaximum_;  // set_per_process_memory_fraction
  double fraction_ = 1.0;
  bool configuredFractionApplied_ = false;  // PYTORCH_NPU_ALLOC_CONF's, once
  DeviceStats stats_;
  int64_t oomRejections_ = 0;  // torch_npu's num_oom_rejections
};

// Maps the data pointer of every allocated block to its block (the deleter
// and recordStream only get the pointer). Sharded to keep frees on different
// threads apart. Leaf lock (Note [Allocator lock ordering]).
class PtrMap {
 public:
  void insert(Block* block);
  Block* find(const void* ptr);
  Block* take(void* ptr);

 private:
  static constexpr size_t kShards = 16;
  using Map = std::unordered_map<void*, Block*>;
  struct Shard {
    std::mutex mutex;
    Map map;
    NodeStash<Map, 8> spare;  // Note [Allocator bookkeeping is recycled]
  };
  Shard& shard(const void* ptr) {
    // Blocks are 512-byte multiples: drop the low bits before hashing.
    return shards_[(reinterpret_cast<uintptr_t>(ptr) >> 9) % kShards];
  }
  std::array<Shard, kShards> shards_;
};

class CachingAllocator {
 public:
  CachingAllocator();
  // Raises for an invalid index. Thread-safe.
  DeviceState& device(c10::DeviceIndex index);
  const std::vector<std::unique_ptr<DeviceState>>& devices() const { return devices_; }
  PtrMap& ptrs() { return ptrs_; }
  // Subscribes to npurt's stream-destroy notification (once; only external
  // streams are ever destroyed, so recordStream subscribes before it lists
  // the first external use).
  void subscribeOnce();

 private:
  static void onStreamDestroyed(npuStream_t handle, int device, void* userData);

  std::vector<std::unique_ptr<DeviceState>> devices_;  // fixed after construction
  PtrMap ptrs_;
  std::once_flag subscribed_;
};

// Leaked on purpose, as PyTorch leaks the CUDA allocator: tensors may be
// freed by static destructors of other libraries, and npurt may call the
// destroy callback during process exit. Thread-safe.
CachingAllocator& allocator();

}  // namespace c10_npu::NPUCachingAllocator::detail
