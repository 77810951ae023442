// Frees across streams: the cross-stream reuse rule of the caching
// allocator (Note [Allocator cross-stream reuse rule] in
// NPUCachingAllocator.h), pending frees, and the device registry. Which
// streams use a block (record_stream, queued tasks, external streams) is in
// NPUStreamUses.cpp. Allocation, splitting and release are in
// NPUDeviceCache.cpp; the file map is in NPUDeviceCache.h.
//
// A block freed while other streams still use it waits in the device's
// pending list until its events completed (checked at every allocation,
// synchronized by emptyCache and the out-of-memory retry); only then does it
// return to its pool and merge with its free neighbours.
//
// Note [Allocator lock ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Locks, outermost first:
//   1. DeviceState::mutex_ — one per device; a thread holds at most one.
//   2. PtrShard::mutex     — leaf: only map operations run under it.
//   3. The memory history's recorder mutex (NPUMemoryHistory.cpp) — leaf:
//      taken under a device mutex to append a trace entry; stacks are
//      gathered before the device mutex is taken (they may take the GIL).
// Under a device mutex the allocator calls only npurt functions that neither
// wait for device work nor run user code (npuMalloc, npuFree, npuSetDevice,
// npuEventCreateWithFlags, npuEventRecord, npuEventDestroy,
// npuGetDeviceProperties, npuStreamGetDevice) and NPUStream::rawHandle(). It
// never calls the task queue, NPUEvent or a synchronize while holding it:
// those may wait for the queue consumer or a device executor, and those
// threads can drop the last reference to a tensor (a task's release) and so
// re-enter the allocator's free path, which would then wait for the mutex: a
// deadlock. Hence the three-phase free (lock, record events unlocked, lock)
// and the take-out/put-back handling of the pending list.
// The npurt stream-destroy callback runs on the thread calling
// npuStreamDestroy and takes the device mutexes one at a time, like any other
// entry point (the allocator never destroys streams, so that thread cannot
// already hold one).
//
// Note [Frees need no event on finished streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The event a free records on a stream that used the block stands for "the
// work enqueued on that stream up to now". If that work has all finished at
// the free (nothing in the task queue, npurt idle, no capture, no held
// failure: npuStreamIsIdle), the event would complete with nothing to wait
// for, so the use is dropped instead and the block may return to its pool at
// once. Otherwise a block freed right after torch.npu.synchronize() waited in
// the pending list until an executor got to the event record, and the next
// allocation of its size took a new block (torch_npu's
// test_mempool_block_free_not_deferred expects the block back).
// Why it is safe: every use of the block on that stream was enqueued before
// the free (the record_stream contract; work enqueued later by another
// thread cannot use freed memory legally), and the queue is checked before
// npurt so that an item between the two is seen by one of them. A capturing
// stream is never "finished" (its work is recorded, not run), so frees
// during a capture keep their events (Note [Task captures and memory reuse]
// is about tasks holding tensors and is unaffected). A stream holding a
// failure keeps its event too, and the check never reports the failure.
#include "core/NPUCachingAllocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/NPUDeviceCache.h"
#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/TaskQueue.h"
#include "core/logging/Loggers.h"
#include "npurt/npurt.hpp"
#include "npurt/npurt_stream_idle.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

void warnSwallowed(const char* where, const c10::Error& e) {
  TORCH_WARN("NPU caching allocator: ignoring an error in ", where,
             " (it cannot be raised there): ", e.what_without_backtrace());
}

// See Note [Frees need no event on finished streams]. No lock held: npurt is
// asked without waiting; a handle npurt refuses (a destroyed external
// stream) counts as not finished, and the usual path handles it.
bool finishedAllWork(const StreamUse& use) {
  if (queue::hasPending(use.stream)) return false;
  npuStream_t handle = use.externalHandle;
  if (handle == nullptr) {
    try {
      handle = use.stream.rawHandle();
    } catch (const c10::Error&) {
      return false;
    }
  }
  int idle = 0;
  return npuStreamIsIdle(handle, &idle) == npuSuccess && idle != 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------

void PtrMap::insert(Block* block) {
  Shard& s = shard(block->ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.spare.insertInto(s.map, block->ptr, block);
}

Block* PtrMap::find(const void* ptr) {
  Shard& s = shard(ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.map.find(const_cast<void*>(ptr));
  return it == s.map.end() ? nullptr : it->second;
}

Block* PtrMap::take(void* ptr) {
  Shard& s = shard(ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  Map::node_type node = s.map.extract(ptr);
  if (node.empty()) return nullptr;
  Block* block = node.mapped();
  s.spare.keep(std::move(node));
  return block;
}

CachingAllocator::CachingAllocator() {
  const c10::DeviceIndex count = device_count();
  for (c10::DeviceIndex d = 0; d < count; ++d) devices_.push_back(std::make_unique<DeviceState>(d));
}

DeviceState& CachingAllocator::device(c10::DeviceIndex index) {
  index = checkedDeviceIndex(index);
  TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < devices_.size(),
              "Invalid device_index: ", static_cast<int>(index), NPU_ERROR_SUFFIX);
  return *devices_[index];
}

void CachingAllocator::subscribeOnce() {
  std::call_once(subscribed_, [this] {
    uint64_t token = 0;
    NPU_CHECK(npuRegisterStreamDestroyCallback(&CachingAllocator::onStreamDestroyed, this, &token));
  });
}

CachingAllocator& allocator() {
  static CachingAllocator* instance = std::make_unique<CachingAllocator>().release();
  return *instance;
}

// ---------------------------------------------------------------------------
// Free across streams
// ---------------------------------------------------------------------------

void DeviceState::free(Block* block) {
  // Phase 1 (locked): account, and return at once if no other stream used it.
  std::vector<StreamUse> uses;
  // Note [Memory history]: the stack is gathered before the lock.
  const Context context = historyOn() ? historyContext(RecordContext::kAll) : Context();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (historyOn()) [[unlikely]] {
      recordTrace("free_requested", device_, reinterpret_cast<uintptr_t>(block->ptr), block->size,
                  block->stream, context, RecordContext::kAll, poolId(*block->pool));
    }
    // No longer allocated at once; still active until its events completed.
    const c10::CachingAllocator::StatTypes types = statTypes(*block->pool);
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i]) continue;
      stats_.allocation[i].decrease(1);
      stats_.allocated_bytes[i].decrease(block->size);
    }
    if (block->oversize) stats_.oversize_allocations.decrease(1);
    // Note [Allocations in the profiler]
    reportToProfiler(block, -static_cast<int64_t>(block->size));
    TORCH_NPU_LOGD(npu_logging::kMemoryLogger,
                   "PTA CachingAllocator free: free = %zu, cached = %lld, allocated = %lld",
                   block->size,
                   static_cast<long long>(stats_.reserved_bytes[kAggregateStat].current),
                   static_cast<long long>(stats_.allocated_bytes[kAggregateStat].current));
    if (block->uses.empty() && block->rawEvents.empty()) {
      freeBlock(block);
      return;
    }
    block->state = BlockState::kFreeing;
    uses = block->uses;
  }

  // Phase 2 (unlocked): queue an event on each managed stream; drain the
  // queue of the streams that need a direct record. See Note [Allocator
  // events on external streams].
  std::vector<NPUEvent> queued;
  std::vector<NPUStream> direct;
  for (const StreamUse& use : uses) {
    if (finishedAllWork(use)) continue;  // needs no event
    if (!use.stream.isExternal()) {
      try {
        NPUEvent event(npuEventDisableTiming);
        event.record(use.stream);
        queued.push_back(std::move(event));
        continue;
      } catch (const c10::Error&) {
        // The queue could not take the record (out of memory, a bad
        // configuration): fall back to a direct record after the wait below.
        // Nothing is lost: pushes never carry another stream's failure.
      }
    }
    // Waits without reporting: a launch failure belongs to its stream's
    // synchronize, not to this free (Note [Launch failures belong to
    // streams] in TaskQueue.cpp).
    queue::waitSubmitted(use.stream);
    direct.push_back(use.stream);
  }

  // Phase 3 (locked): direct records, for uses the destroy callback did not
  // replace meanwhile; then the block waits for its events.
  // `queued` outlives the lock: an NPUEvent left in it is destroyed unlocked.
  std::lock_guard<std::mutex> lock(mutex_);
  bool leaked = false;
  for (const NPUStream& stream : direct) {
    auto it = std::find_if(block->uses.begin(), block->uses.end(),
                           [&](const StreamUse& u) { return u.stream == stream; });
    if (it == block->uses.end()) continue;
    try {
      npuStream_t handle = it->externalHandle != nullptr ? it->externalHandle : stream.rawHandle();
      block->rawEvents.push_back(RawEvent::recordOn(handle));
    } catch (const c10::Error& e) {
      warnSwallowed("the free of a block used by another stream (the block is not reused)", e);
      leaked = true;
    }
  }
  block->uses.clear();
  if (queued.empty() && block->rawEvents.empty() && !leaked) {
    // Every use's stream had finished (or its destroy callback left no
    // event): nothing to wait for.
    freeBlock(block);
    return;
  }
  if (leaked) {
    block->state = BlockState::kLeaked;
    block->rawEvents.clear();
    return;
  }
  for (NPUEvent& event : queued) block->queuedEvents.push_back(std::move(event));
  block->state = BlockState::kPending;
  pending_.push_back(block);
  mayHavePending_.store(true, std::memory_order_relaxed);
}

// Runs at every allocation: NPUEvent::query may drain the task queue, and so
// raise a failure the queue stored (the allocation then raises it, as any
// launch would); the blocks taken out are put back first.
void DeviceState::processPending(bool synchronize) {
  // Without the lock: a block another thread makes pending right now is
  // picked up by a later call, as it would be if it came after the lock.
  if (!synchronize && !mayHavePending_.load(std::memory_order_relaxed)) return;
  std::vector<Block*> work;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A synchronizing caller (the out-of-memory retry, empty_cache) must
    // also see the blocks another thread has taken out right now; otherwise
    // it finds the list empty and raises a spurious out-of-memory error.
    if (synchronize) pendingCv_.wait(lock, [&] { return takenOut_ == 0; });
    if (pending_.empty()) return;
    work.swap(pending_);
    mayHavePending_.store(false, std::memory_order_relaxed);
    ++takenOut_;
  }
  // The blocks taken out are touched by this thread only until put back.
  std::vector<char> done(work.size(), 0);
  auto putBack = [&](std::vector<NPUEvent>& finishedQueued,
                     std::vector<std::shared_ptr<RawEvent>>& finishedRaw) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < work.size(); ++i) {
      Block* block = work[i];
      if (done[i]) {
        for (NPUEvent& e : block->queuedEvents) finishedQueued.push_back(std::move(e));
        for (auto& e : block->rawEvents) finishedRaw.push_back(std::move(e));
        block->queuedEvents.clear();
        block->rawEvents.clear();
        freeBlock(block);
      } else {
        pending_.push_back(block);
        mayHavePending_.store(true, std::memory_order_relaxed);
      }
    }
    --takenOut_;
    pendingCv_.notify_all();
  };
  // Destroyed after the lock is released (NPUEvent's destructor queues).
  std::vector<NPUEvent> finishedQueued;
  std::vector<std::shared_ptr<RawEvent>> finishedRaw;
  try {
    for (size_t i = 0; i < work.size(); ++i) {
      const Block& block = *work[i];
      bool complete = true;
      for (const NPUEvent& e : block.queuedEvents) {
        if (synchronize) {
          e.synchronize();
        } else if (!e.query()) {
          complete = false;
          break;
        }
      }
      for (size_t j = 0; complete && j < block.rawEvents.size(); ++j) {
        if (synchronize) {
          block.rawEvents[j]->synchronize();
        } else if (!block.rawEvents[j]->query()) {
          complete = false;
        }
      }
      done[i] = complete ? 1 : 0;
    }
  } catch (...) {
    putBack(finishedQueued, finishedRaw);
    throw;
  }
  putBack(finishedQueued, finishedRaw);
}

}  // namespace c10_npu::NPUCachingAllocator::detail
