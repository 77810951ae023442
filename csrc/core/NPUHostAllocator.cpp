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

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

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
// memory in use, instead of growing with every new size.
size_t roundSize(size_t nbytes) {
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

class HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes);
  void free(void* ptr);
  void recordEvent(const void* ptr, const NPUStream& stream);
  bool isPinned(const void* ptr);
  void emptyCache();
  HostStats stats();

 private:
  HostBlock* findContaining(const void* ptr);  // lock held
  HostBlock* takeFree(size_t size);            // lock held
  void processPending();
  void releaseFree();

  std::mutex mutex_;
  std::map<uintptr_t, std::unique_ptr<HostBlock>> blocks_;    // all blocks, by address
  std::unordered_map<size_t, std::vector<HostBlock*>> free_;  // reusable, by size
  std::vector<HostBlock*> pending_;                           // freed, events outstanding
  int64_t numHostAlloc_ = 0;                                  // npuMallocHost calls that succeeded
  int64_t numHostFree_ = 0;                                   // npuFreeHost calls that succeeded
};

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

c10::DataPtr HostAllocator::allocate(size_t nbytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &rawDelete, cpu);
  TORCH_CHECK_WITH(OutOfMemoryError, nbytes <= (SIZE_MAX >> 1) + 1,
                   "Out of pinned host memory. Tried to allocate ", nbytes, " bytes",
                   NPU_ERROR_SUFFIX);
  const size_t size = roundSize(nbytes);  // Note [Pinned block sizes]
  processPending();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (HostBlock* block = takeFree(size)) {
      block->allocated = true;
      return c10::DataPtr(block->ptr, block->ptr, &rawDelete, cpu);
    }
  }
  // npuMallocHost may be slow (fresh host memory): not under the mutex.
  void* ptr = nullptr;
  npuError_t status = npuMallocHost(&ptr, size);
  if (status == npuErrorMemoryAllocation) {
    releaseFree();
    status = npuMallocHost(&ptr, size);
  }
  TORCH_CHECK_WITH(OutOfMemoryError, status != npuErrorMemoryAllocation,
                   "Out of pinned host memory. Tried to allocate ", nbytes, " bytes",
                   NPU_ERROR_SUFFIX);
  NPU_CHECK(status);
  auto owned = std::make_unique<HostBlock>(ptr, size);
  owned->allocated = true;
  std::lock_guard<std::mutex> lock(mutex_);
  ++numHostAlloc_;
  blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), std::move(owned));
  return c10::DataPtr(ptr, ptr, &rawDelete, cpu);
}

void HostAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  TORCH_CHECK(it != blocks_.end() && it->second->allocated,
              "Expected a pointer allocated by the npu pinned host allocator, but got ", ptr,
              NPU_ERROR_SUFFIX);
  HostBlock* block = it->second.get();
  block->allocated = false;
  if (block->queuedEvents.empty() && block->rawEvents.empty()) {
    free_[block->size].push_back(block);
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
      free_[block->size].push_back(block);
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
      const npuError_t status = npuFreeHost(block->ptr);
      if (status != npuSuccess) {
        if (firstError == npuSuccess) firstError = status;
        kept.push_back(block);
        continue;
      }
      ++numHostFree_;
      blocks_.erase(reinterpret_cast<uintptr_t>(block->ptr));
    }
    list.swap(kept);
  }
  NPU_CHECK(firstError);
}

void HostAllocator::emptyCache() {
  processPending();
  releaseFree();
}

HostStats HostAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  HostStats st;
  st.num_host_alloc = numHostAlloc_;
  st.num_host_free = numHostFree_;
  for (const auto& [address, block] : blocks_) {
    st.reserved_bytes += static_cast<int64_t>(block->size);
    if (block->allocated) st.allocated_bytes += static_cast<int64_t>(block->size);
  }
  return st;
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
// pinned allocator is an at::HostAllocator, registered below. Its statistics
// are the ones this allocator keeps (current values; no peaks are tracked, so
// the reset functions have nothing to reset).
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
  at::HostStats get_stats() override {
    const HostStats mine = hostAllocator().stats();
    at::HostStats out;
    out.allocated_bytes.current = mine.reserved_bytes;
    out.active_bytes.current = mine.allocated_bytes;
    out.num_host_alloc = mine.num_host_alloc;
    out.num_host_free = mine.num_host_free;
    return out;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
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

HostStats stats() { return hostAllocator().stats(); }

}  // namespace c10_npu::NPUHostAllocator
