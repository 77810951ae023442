// The pinned host allocator (npuMallocHost), cached by rounded size. See
// NPUCachingAllocator.h.
//
// A block freed while an asynchronous copy recorded with recordEvent may
// still use it waits in the pending list until those events completed
// (checked at every allocation and by emptyCache); only then does it return
// to the free list of its size.
//
// Locking: one mutex for the whole allocator, a leaf with respect to the
// device allocator's locks (neither ever takes the other). As in the device
// allocator (Note [Allocator lock ordering] in NPUCachingAllocator.cpp), the
// mutex is never held while calling the task queue, NPUEvent, or anything
// else that may wait for the queue consumer or a device executor: those
// threads may free pinned tensors and re-enter this allocator.
//
// Events: managed streams get an NPUEvent recorded through the task queue
// (ordered after the copies queued before it, without blocking). External
// streams are refused by the queue's record task in compat mode, so for them
// the queue is drained and a runtime event is recorded directly on the raw
// handle (see Note [Allocator events on external streams] in
// NPUStreamUses.cpp). Events are recorded at once, so a destroyed
// external stream is never touched later.
#include <ATen/core/CachingHostAllocator.h>
#include "core/NPUCachingAllocator.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/NPUAllocatorConfig.h"
#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.hpp"

namespace c10_npu::NPUHostAllocator {
namespace {

constexpr size_t kRoundBytes = 512;

// Note [Pinned block sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Blocks are cached by size and reused only for the same size, so sizes are
// rounded up to a power of two (at least kRoundBytes), as PyTorch's CUDA host
// allocator does: a program whose pinned sizes vary then reuses a bounded set
// of size classes, and the cache is at most about twice the peak of pinned
// memory in use, instead of growing with every new size. Requests above
// pinned_max_round_threshold_mb or pinned_max_cached_size_mb (c10's options,
// NPUAllocatorConfig.h) keep their exact size: rounding would nearly double
// a large request, and a block above the cache limit is never reused.
size_t roundSize(size_t nbytes, const NPUCachingAllocator::AllocatorConfig& config) {
  if (nbytes > config.pinnedMaxRoundThreshold || nbytes > config.pinnedMaxCachedSize) {
    return nbytes;
  }
  size_t size = kRoundBytes;
  while (size < nbytes) size <<= 1;
  return size;
}

void rawDelete(void* ptr) noexcept;

struct HostBlock {
  HostBlock(void* p, size_t s) : ptr(p), size(s) {}
  void* const ptr;
  const size_t size;  // rounded
  // Guarded by the allocator mutex, except the events of a pending block
  // taken out by processPending (then only the taking thread touches them).
  bool allocated = false;
  std::vector<NPUEvent> queuedEvents;
  std::vector<npurt::EventHandle> rawEvents;
};

// Note [Pinned allocator statistics]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The statistics are PyTorch's at::HostStats, with the meaning
// torch.cuda.host_memory_stats and torch_npu document, so code and tests
// written for either read them unchanged:
//  - allocations / allocated_bytes: blocks held from npurt (in use and
//    cached), in rounded sizes: up at npuMallocHost, down at npuFreeHost;
//  - active_requests / active_bytes: blocks handed out and not yet reusable:
//    up when allocate returns a block (new or cached), down when the block
//    returns to the free list, which for a block used by a queued copy is
//    once that copy completed (not when the tensor dies);
//  - num_host_alloc / num_host_free and host_alloc_time / host_free_time
//    (microseconds): the npuMallocHost / npuFreeHost calls that succeeded.
// Each Stat tracks current, peak and the accumulated increases and decreases;
// PyTorch's reset rules apply (Stat::reset_peak / reset_accumulated). All
// of it is guarded by the allocator mutex and exact, since one mutex guards
// the whole allocator (CUDA's per-bucket peaks are an approximation).
class HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes);
  void free(void* ptr);
  void recordEvent(const void* ptr, const NPUStream& stream);
  bool isPinned(const void* ptr);
  void emptyCache();
  at::HostStats stats();
  void resetAccumulatedStats();
  void resetPeakStats();

 private:
  HostBlock* findContaining(const void* ptr);  // lock held
  HostBlock* takeFree(size_t size);            // lock held
  // A block no copy uses any more: cached, or returned to npurt if larger
  // than `maxCachedSize` (pinned_max_cached_size_mb). Lock held.
  void makeReusable(HostBlock* block, size_t maxCachedSize);
  // npuFreeHost of a cached or reusable block; on success the block is gone.
  // Lock held.
  npuError_t releaseBlock(HostBlock* block);
  void processPending();
  void releaseFree();

  std::mutex mutex_;
  std::map<uintptr_t, std::unique_ptr<HostBlock>> blocks_;    // all blocks, by address
  std::unordered_map<size_t, std::vector<HostBlock*>> free_;  // reusable, by size
  std::vector<HostBlock*> pending_;                           // freed, events outstanding
  at::HostStats stats_;                                       // Note [Pinned allocator statistics]
};

// Microseconds since `start`, for the host_alloc_time / host_free_time stats.
int64_t microsecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// Leaked on purpose (like the device allocator): pinned tensors may be freed
// by other libraries' static destructors at exit.
HostAllocator& hostAllocator() {
  static HostAllocator* instance = std::make_unique<HostAllocator>().release();
  return *instance;
}

HostBlock* HostAllocator::findContaining(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  HostBlock* block = it->second.get();
  return address < it->first + block->size ? block : nullptr;
}

HostBlock* HostAllocator::takeFree(size_t size) {
  auto it = free_.find(size);
  if (it == free_.end() || it->second.empty()) return nullptr;
  HostBlock* block = it->second.back();
  it->second.pop_back();
  return block;
}

void HostAllocator::makeReusable(HostBlock* block, size_t maxCachedSize) {
  stats_.active_requests.decrease(1);
  stats_.active_bytes.decrease(static_cast<int64_t>(block->size));
  // A block npurt refuses to free stays cached; emptyCache reports it.
  if (block->size > maxCachedSize && releaseBlock(block) == npuSuccess) return;
  free_[block->size].push_back(block);
}

npuError_t HostAllocator::releaseBlock(HostBlock* block) {
  const auto start = std::chrono::steady_clock::now();
  const npuError_t status = npuFreeHost(block->ptr);
  if (status != npuSuccess) return status;
  ++stats_.num_host_free;
  stats_.host_free_time.increase(microsecondsSince(start));
  stats_.allocations.decrease(1);
  stats_.allocated_bytes.decrease(static_cast<int64_t>(block->size));
  blocks_.erase(reinterpret_cast<uintptr_t>(block->ptr));  // destroys the block
  return npuSuccess;
}

c10::DataPtr HostAllocator::allocate(size_t nbytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &rawDelete, cpu);
  TORCH_CHECK_WITH(OutOfMemoryError, nbytes <= (SIZE_MAX >> 1) + 1,
                   "Out of pinned host memory. Tried to allocate ", nbytes, " bytes",
                   NPU_ERROR_SUFFIX);
  const size_t size = roundSize(nbytes, NPUCachingAllocator::allocatorConfig());
  processPending();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (HostBlock* block = takeFree(size)) {
      block->allocated = true;
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(static_cast<int64_t>(size));
      return c10::DataPtr(block->ptr, block->ptr, &rawDelete, cpu);
    }
  }
  // npuMallocHost may be slow (fresh host memory): not under the mutex.
  void* ptr = nullptr;
  auto start = std::chrono::steady_clock::now();
  npuError_t status = npuMallocHost(&ptr, size);
  if (status == npuErrorMemoryAllocation) {
    releaseFree();
    start = std::chrono::steady_clock::now();
    status = npuMallocHost(&ptr, size);
  }
  const int64_t allocMicros = microsecondsSince(start);
  TORCH_CHECK_WITH(OutOfMemoryError, status != npuErrorMemoryAllocation,
                   "Out of pinned host memory. Tried to allocate ", nbytes, " bytes",
                   NPU_ERROR_SUFFIX);
  NPU_CHECK(status);
  auto owned = std::make_unique<HostBlock>(ptr, size);
  owned->allocated = true;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.num_host_alloc;
  stats_.host_alloc_time.increase(allocMicros);
  stats_.allocations.increase(1);
  stats_.allocated_bytes.increase(static_cast<int64_t>(size));
  stats_.active_requests.increase(1);
  stats_.active_bytes.increase(static_cast<int64_t>(size));
  blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), std::move(owned));
  return c10::DataPtr(ptr, ptr, &rawDelete, cpu);
}

void HostAllocator::free(void* ptr) {
  const size_t maxCachedSize = NPUCachingAllocator::allocatorConfig().pinnedMaxCachedSize;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  TORCH_CHECK(it != blocks_.end() && it->second->allocated,
              "Expected a pointer allocated by the npu pinned host allocator, but got ", ptr,
              NPU_ERROR_SUFFIX);
  HostBlock* block = it->second.get();
  block->allocated = false;
  if (block->queuedEvents.empty() && block->rawEvents.empty()) {
    makeReusable(block, maxCachedSize);
  } else {
    pending_.push_back(block);
  }
}

void HostAllocator::recordEvent(const void* ptr, const NPUStream& stream) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HostBlock* block = findContaining(ptr);
    if (block == nullptr || !block->allocated) return;  // not ours: no-op
  }
  // Note [Pinned blocks used by a capture]: no event is recorded into a
  // capture. The captured copy holds the host tensor until its graph is
  // destroyed, so the block cannot be reused while a replay may read it; an
  // event recorded there would be a captured event, which cannot be queried
  // outside the graph, and every later allocation would raise querying it.
  if ((graphs::anyCapture() && graphs::recorderOf(stream) != nullptr) ||
      graphs::isCapturing(stream)) {
    return;
  }
  if (!stream.isExternal()) {
    NPUEvent event(npuEventDisableTiming);
    event.record(stream);  // through the queue: after the copies queued so far
    std::lock_guard<std::mutex> lock(mutex_);
    HostBlock* block = findContaining(ptr);
    // Freed meanwhile (by another thread): the event has nothing to protect.
    if (block != nullptr && block->allocated) block->queuedEvents.push_back(std::move(event));
    return;  // an event left unused is destroyed here, after the unlock
  }
  // Unlocked; then the raw record sees all queued work. Waits without
  // reporting: a failure belongs to the stream's own synchronize.
  queue::waitSubmitted(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  HostBlock* block = findContaining(ptr);
  if (block == nullptr || !block->allocated) return;
  npuEvent_t e = nullptr;
  NPU_CHECK(npuEventCreateWithFlags(&e, npuEventDisableTiming));
  npurt::EventHandle event(e);
  NPU_CHECK(npuEventRecord(e, stream.rawHandle()));
  block->rawEvents.push_back(std::move(event));
}

void HostAllocator::processPending() {
  std::vector<HostBlock*> work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.empty()) return;
    work.swap(pending_);
  }
  const size_t maxCachedSize = NPUCachingAllocator::allocatorConfig().pinnedMaxCachedSize;
  std::vector<char> done(work.size(), 0);
  // Completed events are destroyed after the lock is released.
  std::vector<NPUEvent> finishedQueued;
  std::vector<npurt::EventHandle> finishedRaw;
  auto putBack = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < work.size(); ++i) {
      HostBlock* block = work[i];
      if (!done[i]) {
        pending_.push_back(block);
        continue;
      }
      for (NPUEvent& e : block->queuedEvents) finishedQueued.push_back(std::move(e));
      for (npurt::EventHandle& e : block->rawEvents) finishedRaw.push_back(std::move(e));
      block->queuedEvents.clear();
      block->rawEvents.clear();
      makeReusable(block, maxCachedSize);
    }
  };
  try {
    for (size_t i = 0; i < work.size(); ++i) {
      bool complete = true;
      for (const NPUEvent& e : work[i]->queuedEvents) {
        if (!e.query()) {
          complete = false;
          break;
        }
      }
      for (size_t j = 0; complete && j < work[i]->rawEvents.size(); ++j) {
        const npuError_t status = npuEventQuery(work[i]->rawEvents[j].get());
        if (status == npuErrorNotReady) {
          complete = false;
        } else {
          NPU_CHECK(status);
        }
      }
      done[i] = complete ? 1 : 0;
    }
  } catch (...) {
    putBack();
    throw;
  }
  putBack();
}

void HostAllocator::releaseFree() {
  std::lock_guard<std::mutex> lock(mutex_);
  npuError_t firstError = npuSuccess;
  for (auto& [size, list] : free_) {
    std::vector<HostBlock*> kept;
    for (HostBlock* block : list) {
      const npuError_t status = releaseBlock(block);
      if (status != npuSuccess) {
        if (firstError == npuSuccess) firstError = status;
        kept.push_back(block);
      }
    }
    list.swap(kept);
  }
  NPU_CHECK(firstError);
}

void HostAllocator::emptyCache() {
  processPending();
  releaseFree();
}

at::HostStats HostAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

// Applies `reset` (reset_peak or reset_accumulated, which Stat and
// DurationStat both have) to every statistic that has it.
template <typename Reset>
void resetEach(at::HostStats& stats, Reset reset) {
  for (c10::CachingAllocator::Stat* stat :
       {&stats.allocations, &stats.allocated_bytes, &stats.active_requests, &stats.active_bytes}) {
    reset(*stat);
  }
  reset(stats.host_alloc_time);
  reset(stats.host_free_time);
}

void HostAllocator::resetAccumulatedStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  resetEach(stats_, [](auto& stat) { stat.reset_accumulated(); });
}

void HostAllocator::resetPeakStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  resetEach(stats_, [](auto& stat) { stat.reset_peak(); });
}

bool HostAllocator::isPinned(const void* ptr) {
  if (ptr == nullptr) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (findContaining(ptr) != nullptr) return true;
  }
  // npuMallocHost'ed or npuHostRegister'ed memory not from this allocator.
  npuPointerAttributes attributes{};
  if (npuPointerGetAttributes(&attributes, ptr) != npuSuccess) return false;
  return attributes.type == npuMemoryTypeHost;
}

// Deleters run inside destructors and must not throw.
void rawDelete(void* ptr) noexcept {
  if (ptr == nullptr) return;
  try {
    hostAllocator().free(ptr);
  } catch (const std::exception& e) {
    // A pointer this allocator never handed out: leave the memory alone.
    std::fprintf(stderr, "NPU pinned host allocator: %s\n", e.what());
  }
}

// Note [The pinned allocator is PyTorch's host allocator for npu]
// PyTorch's device-generic host-memory API (torch.accelerator.empty_host_cache,
// at::getHostAllocator(PrivateUse1)) calls the at::HostAllocator registered for
// the device type, without a null check: unregistered, it crashes. So the
// pinned allocator is an at::HostAllocator, registered below, and its
// statistics are at::HostStats (Note [Pinned allocator statistics]).
class PinnedAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return hostAllocator().allocate(nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count != 0) std::memcpy(dest, src, count);  // host memory
  }
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream stream) override {
    hostAllocator().recordEvent(ptr, NPUStream(stream));
    return true;
  }
  void empty_cache() override { hostAllocator().emptyCache(); }
  at::HostStats get_stats() override { return hostAllocator().stats(); }
  void reset_accumulated_stats() override { hostAllocator().resetAccumulatedStats(); }
  void reset_peak_stats() override { hostAllocator().resetPeakStats(); }
};

}  // namespace

namespace {
PinnedAllocator* pinnedAllocator() {
  // Leaked, as the allocator state it fronts.
  static PinnedAllocator* instance = std::make_unique<PinnedAllocator>().release();
  return instance;
}

// See Note [The pinned allocator is PyTorch's host allocator for npu].
const bool kRegistered = [] {
  at::setHostAllocator(c10::DeviceType::PrivateUse1, pinnedAllocator());
  return true;
}();
}  // namespace

c10::Allocator* get() { return pinnedAllocator(); }

void recordEvent(const void* ptr, NPUStream stream) { hostAllocator().recordEvent(ptr, stream); }

bool isPinnedPtr(const void* ptr) { return hostAllocator().isPinned(ptr); }

void emptyCache() { hostAllocator().emptyCache(); }

}  // namespace c10_npu::NPUHostAllocator
