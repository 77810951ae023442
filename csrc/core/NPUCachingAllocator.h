// The stream-aware caching allocator for npu device memory, and the pinned
// host allocator.
//
// Layer: framework core.
//
// Note [Allocator cross-stream reuse rule]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A block is tagged with the stream that was current when it was allocated
// (its "allocation stream") and, once freed, is reused freely by later
// allocations on that same stream: stream order makes that safe. It is never
// handed to another stream while work queued on a stream that used it may
// still run. Tensor.record_stream(s) adds s to the block's uses; at free, an
// event is recorded (through the task queue, so after the work already
// queued) on each used stream, and the block returns to its pool only when
// all those events completed. erase_stream(t, s) removes a recorded use. If
// a used external stream is destroyed while the block is alive, the event is
// recorded from npurt's destroy notification, while the stream still exists:
// a destroyed stream is never touched afterwards.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "core/NPUStream.h"

namespace c10_npu::NPUPluggableAllocator {
class PluggableAllocator;
}  // namespace c10_npu::NPUPluggableAllocator

namespace c10_npu::NPUCachingAllocator {

// Memory statistics of one device: c10's, as torch.cuda.memory_stats and
// torch.accelerator.memory_stats report them. Definitions (CUDA's): for each
// of all / small_pool / large_pool, `current`, `peak`, and the running totals
// `allocated` (increases) and `freed` (decreases) of
//   allocation, allocated_bytes  blocks handed out (rounded sizes) and not freed
//   requested_bytes              bytes asked for by those blocks (unrounded)
//   active, active_bytes         allocated blocks plus freed blocks still
//                                awaiting other streams (record_stream)
//   segment, reserved_bytes      segments held from npurt
//   inactive_split(_bytes)       free pieces of split segments (not releasable)
// plus num_alloc_retries (cache flushes after a failed npuMalloc), num_ooms,
// num_sync_all_streams (releases that waited for streams), num_device_alloc /
// num_device_free (npuMalloc / npuFree of segments), oversize_allocations /
// oversize_segments (at least max_split_size) and max_split_size (-1: none).
using DeviceStats = c10::CachingDeviceAllocator::DeviceStats;

// The allocator registered for DeviceType::PrivateUse1: a c10::DeviceAllocator,
// so torch.accelerator.memory_* work on npu. Thread-safe.
c10::DeviceAllocator* get();

// Allocates on the current stream of `device`. Raises torch.OutOfMemoryError
// (naming the requested size, capacity, allocated and reserved bytes) if
// npurt is out of memory even after the cache was released, if the request
// would exceed the per-process memory fraction, or if it is 1 EiB or more
// ("Tried to allocate more than 1EB memory", as torch_npu). Thread-safe.
c10::DataPtr allocate(size_t nbytes, c10::DeviceIndex device);
// As allocate, on `stream` (and its device). Thread-safe.
c10::DataPtr allocateOnStream(size_t nbytes, const NPUStream& stream);

// torch.npu.caching_allocator_alloc / _delete: a block not owned by a
// DataPtr. rawDelete of a pointer rawAlloc did not return raises. Both
// thread-safe.
void* rawAlloc(size_t nbytes, const NPUStream& stream);
void rawDelete(void* ptr);

// Tensor.record_stream: the block behind `ptr` (a pointer returned by this
// allocator) must not be reused until the work queued on `stream` up to the
// moment of its free has completed. Thread-safe.
void recordStream(const c10::DataPtr& ptr, NPUStream stream);

// For a task about to be queued on `stream` that uses the memory behind
// `ptr`: true if the task may capture it as a CPU alias, which does not own
// the memory (Note [Task captures and memory reuse] in csrc/aten/OpTask.cpp).
// So it is for a live block of this allocator allocated on `stream`, and for
// one allocated on another stream of the device, whose use by `stream` is
// then recorded (Note [Tasks on other streams record their use]). False for
// external or capturing streams using another stream's block, and for memory
// this allocator did not hand out: the task holds those by reference.
// Thread-safe; the caller keeps `ptr` alive during the call and queues the
// task on `stream` right after.
bool aliasableByTask(const c10::DataPtr& ptr, const NPUStream& stream);

// True if `ptr` is a live block of this allocator allocated on `stream`.
// A query only: it records nothing. Thread-safe; the caller keeps `ptr` alive
// during the call.
bool isAllocatedOn(const c10::DataPtr& ptr, const NPUStream& stream);

// torch_npu.erase_stream: removes a use recorded with recordStream (not a
// queued task's use of the block). Thread-safe.
void eraseStream(const c10::DataPtr& ptr, NPUStream stream);

// Releases the whole free segments of every device back to npurt: those of
// the default pools and of private pools nobody uses any more; with a pool
// id, those of that private pool only. Waits for the streams that last used
// them first. Thread-safe.
void emptyCache(c10::MempoolId_t pool = {0, 0});

// torch_npu's emptyVirtAddrCache: as emptyCache for the expandable segments
// of the default pools, but their physical pages are kept for later maps
// (Note [Expandable segments]); raises unless expandable_segments is on.
// Thread-safe.
void emptyVirtAddrCache();

// Note [Memory held by queued tasks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Layers above may hold allocated blocks that are as good as free: the op
// path keeps tensors that external or capturing streams use alive until the
// tasks that use them ran (Note [Tasks on other streams record their use]),
// and destroys finished tasks' captures on host threads later (Note
// [Task captures and memory reuse], Note [Task captures are released on
// producer threads]). Before raising out-of-memory, the allocator calls the
// registered callbacks for the device, on the allocating thread with no
// allocator lock held; a callback waits for such work without reporting its
// failures and frees what it held. CUDA's FreeCudaMemoryCallbacksRegistry
// plays this role. Thread-safe; callbacks are never unregistered.
using FreeMemoryCallback = void (*)(c10::DeviceIndex device);
void registerFreeMemoryCallback(FreeMemoryCallback callback);

// torch_npu's _npu_attach_out_of_memory_observer (CUDA's OutOfMemoryObserver):
// called right before torch.OutOfMemoryError is raised, on the allocating
// thread with no allocator lock held, with the device, the size asked for,
// the device's capacity and its free bytes. An observer that throws is
// reported with a warning; the out-of-memory error is raised regardless.
// Thread-safe; observers are never removed.
using OutOfMemoryObserver =
    std::function<void(int64_t device, int64_t requested, int64_t deviceTotal, int64_t deviceFree)>;
void attachOutOfMemoryObserver(OutOfMemoryObserver observer);

// Statistics (see DeviceStats). Thread-safe.
DeviceStats getDeviceStats(c10::DeviceIndex device);
// torch_npu's num_oom_rejections (not a field of c10's DeviceStats): segments
// refused by throw_on_npumalloc_oom (NPUAllocatorConfig.h) since the last
// resetAccumulatedStats. Thread-safe.
int64_t getOomRejections(c10::DeviceIndex device);
void resetPeakStats(c10::DeviceIndex device);
void resetAccumulatedStats(c10::DeviceIndex device);

// (free, total) bytes of the device, as npuMemGetInfo. Thread-safe.
std::pair<size_t, size_t> memGetInfo(c10::DeviceIndex device);

// torch.npu.set_per_process_memory_fraction: the reserved bytes of `device`
// may not exceed fraction * capacity; a segment that would cross the limit
// is an out-of-memory error (after releasing the cache). Raises unless
// 0 <= fraction <= 1. get returns the fraction in force (1.0 by default).
// Thread-safe.
void setMemoryFraction(double fraction, c10::DeviceIndex device);
double getMemoryFraction(c10::DeviceIndex device);

// Private pools (Note [Private memory pools] in NPUBlockPool.h): the API an
// NPUGraph capture and torch.npu.MemPool use. All thread-safe.
//
// A new id for a user pool, {0, n} with n unique in the process (ids of
// graph-owned pools, {n, 0}, come from the graph).
c10::MempoolId_t newMempoolId();
// How a private pool gets and uses its segments (torch.npu.MemPool's
// arguments), fixed when the pool is created.
struct PoolOptions {
  // Segments come from this allocator's alloc/free instead of npuMalloc/npuFree
  // (Note [Pluggable allocators]); the pool holds it until its last segment is released.
  std::shared_ptr<NPUPluggableAllocator::PluggableAllocator> allocator;
  // When an allocation outside every private pool finds no memory, it may take
  // a free block of this pool (while the pool is in use) before the cache is released.
  bool useOnOom = false;
  // Segments of this pool are never split: one block per segment.
  bool noSplit = false;
};
// Creates the pool on `device` with use count 1 and `options`, or increments
// the count of an existing pool (whose options stay as they were).
void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t id,
                        const PoolOptions& options = {});
// From now on, allocations on `device` whose current stream `filter` accepts
// (called on the allocating thread, under the device lock: it must be quick
// and must not allocate) come from pool `id`, created if needed; takes a use.
void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                         std::function<bool(const NPUStream&)> filter);
// Stops the routing of the newest beginAllocateToPool of `id` (does not drop
// the use: call releasePool for that, as CUDA's graphs and use_mem_pool do).
void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id);
// Drops one use. At zero, the pool's free segments go back to npurt at the
// next emptyCache; blocks still allocated from it return to it when freed.
void releasePool(c10::DeviceIndex device, c10::MempoolId_t id);
// The pool's use count; 0 if it does not exist (any more).
int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id);

}  // namespace c10_npu::NPUCachingAllocator

namespace c10_npu::NPUHostAllocator {

// Pinned host memory (npuMallocHost), cached by size. A block freed while an
// asynchronous copy that uses it may still run is reused only after that copy
// completed (recordEvent). Thread-safe.
c10::Allocator* get();

// Marks the pinned block behind `ptr` as used by work queued on `stream` (a
// non_blocking copy): it is not reused until that work completed. No-op for
// pointers not from this allocator. Thread-safe.
void recordEvent(const void* ptr, NPUStream stream);

// True if ptr is inside memory of this allocator or registered with npurt.
bool isPinnedPtr(const void* ptr);

void emptyCache();

// Statistics: at::getHostAllocator(c10::DeviceType::PrivateUse1)->get_stats()
// (Note [Pinned allocator statistics] in NPUHostAllocator.cpp).

}  // namespace c10_npu::NPUHostAllocator
