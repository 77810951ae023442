// The stream-aware caching allocator for npu device memory. See
// NPUCachingAllocator.h and Note [Allocator cross-stream reuse rule].
//
// Model: one npuMalloc per block (no splitting), sizes rounded up to 512 B.
// Each device has a pool of free blocks ordered by (allocation stream, size),
// so a request takes the smallest free block of its stream that fits, within
// the bound of Note [Allocator best-fit bound]. A block freed while other
// streams still use it waits in the device's pending list until its events
// completed (checked at every allocation, synchronized by emptyCache and the
// out-of-memory retry).
//
// Note [Allocator lock ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Locks, outermost first:
//   1. DeviceState::mutex_ — one per device; a thread holds at most one.
//   2. PtrShard::mutex     — leaf: only map operations run under it.
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
// Note [Allocator events on external streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// For managed streams the free path records an NPUEvent through the task
// queue (NPUEvent::record), which orders it after the work already queued
// without blocking. External streams cannot take that path: in compat mode
// NPUEvent::record and the queue's record task refuse them, and the event
// must in any case be recorded while the stream still exists. So for them the
// allocator drains the stream's queue (no lock held: see Note [Allocator lock
// ordering]) and then records a runtime event directly with npuEventRecord on
// the raw handle resolved at recordStream time, under the device mutex and
// only if the use is still listed. The destroy callback removes every use of
// a dying stream under the same mutexes (after recording its own event on
// it), and recordStream refuses handles that callback has seen, so a raw
// record never reaches a destroyed stream.
#include "core/NPUCachingAllocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu::NPUCachingAllocator {
namespace {

constexpr size_t kRoundBytes = 512;
// Note [Allocator best-fit bound]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A free block of size B serves a request of R <= B bytes only if
// B <= kSmallBlockBytes or B <= 2 * R: without splitting, a huge block handed
// to a tiny request would be wasted for the tensor's lifetime.
constexpr size_t kSmallBlockBytes = size_t{1} << 20;
constexpr size_t kPtrShards = 16;

void rawDelete(void* ptr) noexcept;

std::string formatSize(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", bytes);
  } else if (bytes < (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes < (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  }
  return buf;
}

// A runtime event recorded directly with npurt (not through the task queue).
// See Note [Allocator events on external streams]. Shared: the destroy
// callback records one event on a dying stream for every block that used it.
class RawEvent {
 public:
  // Records a new event on `handle`. Non-blocking; raises if npurt refuses.
  static std::shared_ptr<RawEvent> recordOn(npuStream_t handle) {
    auto event = std::make_shared<RawEvent>();
    npuEvent_t e = nullptr;
    NPU_CHECK(npuEventCreateWithFlags(&e, npuEventDisableTiming));
    event->handle_ = npurt::EventHandle(e);
    NPU_CHECK(npuEventRecord(e, handle));
    return event;
  }
  bool query() const {
    const npuError_t status = npuEventQuery(handle_.get());
    if (status == npuErrorNotReady) return false;
    NPU_CHECK(status);
    return true;
  }
  void synchronize() const { NPU_CHECK(npuEventSynchronize(handle_.get())); }

 private:
  npurt::EventHandle handle_;
};

// A stream other than the allocation stream that used a live block.
struct StreamUse {
  NPUStream stream;
  npuStream_t externalHandle = nullptr;  // raw handle if external, resolved at recordStream
};

enum class BlockState : uint8_t {
  kAllocated,  // owned by a DataPtr
  kFreeing,    // in the free path, between its two locked phases
  kPending,    // freed; waits for its events
  kCached,     // in the pool
  kLeaked,     // an event could not be recorded: never reused (stays reserved)
};

struct Block {
  Block(c10::DeviceIndex d, c10::StreamId s, size_t sz, void* p)
      : device(d), stream(s), size(sz), ptr(p) {}
  const c10::DeviceIndex device;
  const c10::StreamId stream;  // allocation stream
  const size_t size;           // rounded size, as allocated from npurt
  void* const ptr;
  // Fields below are guarded by the device mutex, except the events of a
  // kPending block taken out of the pending list by processPending (then the
  // taking thread alone touches them).
  BlockState state = BlockState::kAllocated;
  uint64_t generation = 0;                           // bumped each time it enters the pool
  std::vector<StreamUse> uses;                       // recordStream'd streams
  std::vector<std::shared_ptr<RawEvent>> rawEvents;  // direct records (see Note above)
  std::vector<NPUEvent> queuedEvents;                // records through the task queue
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

class DeviceState {
 public:
  explicit DeviceState(c10::DeviceIndex device) : device_(device) {}

  c10::DataPtr allocate(size_t nbytes);
  void free(Block* block);
  void recordStream(Block* block, const NPUStream& stream);
  void eraseStream(Block* block, const NPUStream& stream);
  // Returns the stream of a use of `handle`, after marking the handle dead.
  std::optional<NPUStream> markStreamDead(npuStream_t handle);
  // Replaces every use of `handle` by `event` (nullptr: the stream was
  // synchronized instead).
  void replaceUses(npuStream_t handle, const std::shared_ptr<RawEvent>& event);
  // Moves pending blocks whose events completed back to the pool; with
  // `synchronize`, waits for all of them. Takes the lock itself.
  void processPending(bool synchronize);
  // npuFree's every cached block (waits for the device first: npuFree does
  // not wait for tasks that may still use the memory).
  void releaseCached();
  // Waits until the work queued so far on the allocation streams of the
  // snapshot's blocks finished, without reporting their failures; drops the
  // blocks whose stream cannot be reached. Takes the lock itself.
  void waitForStreams(std::vector<std::pair<void*, uint64_t>>& snapshot);

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void resetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.max_allocated_bytes = stats_.allocated_bytes;
    stats_.max_reserved_bytes = stats_.reserved_bytes;
  }
  void resetAccumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_allocs = 0;
  }
  std::string summary();

 private:
  Block* takeFromPool(c10::StreamId stream, size_t size);  // lock held
  Block* mallocBlock(c10::StreamId stream, size_t size);   // lock held; nullptr on OOM
  void toPool(Block* block);                               // lock held
  void markAllocated(Block* block);                        // lock held
  std::string oomMessage(size_t nbytes);                   // lock held

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  std::unordered_map<void*, std::unique_ptr<Block>> blocks_;  // all blocks held from npurt
  std::set<Block*, PoolLess> pool_;                           // kCached blocks
  std::vector<Block*> pending_;                               // kPending blocks
  int takenOut_ = 0;  // processPending calls holding blocks out of pending_
  std::condition_variable pendingCv_;  // signalled when takenOut_ drops
  // External stream handles whose destroy notification arrived; see Note
  // [Allocator events on external streams]. Handles are never reused.
  std::unordered_set<npuStream_t> deadExternal_;
  DeviceStats stats_;
};

// Maps the data pointer of every allocated block to its block (the deleter
// and recordStream only get the pointer). Sharded to keep frees on different
// threads apart. Leaf lock.
class PtrMap {
 public:
  void insert(Block* block) {
    Shard& s = shard(block->ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.map.emplace(block->ptr, block);
  }
  Block* find(const void* ptr) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(const_cast<void*>(ptr));
    return it == s.map.end() ? nullptr : it->second;
  }
  Block* take(void* ptr) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(ptr);
    if (it == s.map.end()) return nullptr;
    Block* block = it->second;
    s.map.erase(it);
    return block;
  }

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<void*, Block*> map;
  };
  Shard& shard(const void* ptr) {
    // Blocks are at least 64-byte aligned: drop the low bits before hashing.
    return shards_[(reinterpret_cast<uintptr_t>(ptr) >> 9) % kPtrShards];
  }
  std::array<Shard, kPtrShards> shards_;
};

class CachingAllocator {
 public:
  CachingAllocator() {
    const c10::DeviceIndex count = device_count();
    for (c10::DeviceIndex d = 0; d < count; ++d) {
      devices_.push_back(std::make_unique<DeviceState>(d));
    }
  }
  DeviceState& device(c10::DeviceIndex index) {
    index = checkedDeviceIndex(index);
    TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < devices_.size(),
                "Invalid device_index: ", static_cast<int>(index), NPU_ERROR_SUFFIX);
    return *devices_[index];
  }
  const std::vector<std::unique_ptr<DeviceState>>& devices() const { return devices_; }
  PtrMap& ptrs() { return ptrs_; }

  // Subscribes to npurt's stream-destroy notification (once; only external
  // streams are ever destroyed, so recordStream subscribes before it lists
  // the first external use).
  void subscribeOnce() {
    std::call_once(subscribed_, [this] {
      uint64_t token = 0;
      NPU_CHECK(
          npuRegisterStreamDestroyCallback(&CachingAllocator::onStreamDestroyed, this, &token));
    });
  }

 private:
  static void onStreamDestroyed(npuStream_t handle, int device, void* userData);

  std::vector<std::unique_ptr<DeviceState>> devices_;  // fixed after construction
  PtrMap ptrs_;
  std::once_flag subscribed_;
};

// Leaked on purpose, as PyTorch leaks the CUDA allocator: tensors may be
// freed by static destructors of other libraries, and npurt may call the
// destroy callback during process exit, after this file's statics would have
// been destroyed.
CachingAllocator& allocator() {
  static CachingAllocator* instance = std::make_unique<CachingAllocator>().release();
  return *instance;
}

void warnSwallowed(const char* where, const c10::Error& e) {
  TORCH_WARN("NPU caching allocator: ignoring an error in ", where,
             " (it cannot be raised there): ", e.what_without_backtrace());
}

// ---------------------------------------------------------------------------
// DeviceState
// ---------------------------------------------------------------------------

Block* DeviceState::takeFromPool(c10::StreamId stream, size_t size) {
  auto it = pool_.lower_bound(PoolLess::Key{stream, size, 0});
  if (it == pool_.end()) return nullptr;
  Block* block = *it;
  if (block->stream != stream) return nullptr;
  // See Note [Allocator best-fit bound].
  if (block->size > kSmallBlockBytes && block->size / 2 > size) return nullptr;
  pool_.erase(it);
  --stats_.cached_blocks;
  return block;
}

Block* DeviceState::mallocBlock(c10::StreamId stream, size_t size) {
  npurt::DeviceGuard guard(device_);
  void* ptr = nullptr;
  const npuError_t status = npuMalloc(&ptr, size);
  if (status == npuErrorMemoryAllocation) return nullptr;
  NPU_CHECK(status);
  auto owned = std::make_unique<Block>(device_, stream, size, ptr);
  Block* block = owned.get();
  blocks_.emplace(ptr, std::move(owned));
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.max_reserved_bytes = std::max(stats_.max_reserved_bytes, stats_.reserved_bytes);
  return block;
}

void DeviceState::markAllocated(Block* block) {
  block->state = BlockState::kAllocated;
  stats_.allocated_bytes += static_cast<int64_t>(block->size);
  stats_.max_allocated_bytes = std::max(stats_.max_allocated_bytes, stats_.allocated_bytes);
  ++stats_.active_blocks;
  ++stats_.num_allocs;
}

void DeviceState::toPool(Block* block) {
  block->state = BlockState::kCached;
  ++block->generation;
  pool_.insert(block);
  ++stats_.cached_blocks;
}

std::string DeviceState::oomMessage(size_t nbytes) {
  npuDeviceProp prop{};
  const bool haveProp = npuGetDeviceProperties(&prop, device_) == npuSuccess;
  std::ostringstream os;
  os << "NPU out of memory. Tried to allocate " << formatSize(nbytes) << " (NPU "
     << static_cast<int>(device_) << "; ";
  if (haveProp) {
    os << formatSize(prop.totalMemory) << " total capacity; ";
  }
  os << formatSize(static_cast<uint64_t>(stats_.allocated_bytes)) << " already allocated; ";
  if (haveProp) os << formatSize(prop.freeMemory) << " free; ";
  os << formatSize(static_cast<uint64_t>(stats_.reserved_bytes))
     << " reserved in total by PyTorch)";
  return os.str();
}

c10::DataPtr DeviceState::allocate(size_t nbytes) {
  const c10::Device dev(c10::DeviceType::PrivateUse1, device_);
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &rawDelete, dev);
  TORCH_CHECK_WITH(OutOfMemoryError, nbytes <= SIZE_MAX - kRoundBytes,
                   "NPU out of memory. Tried to allocate ", nbytes, " bytes", NPU_ERROR_SUFFIX);
  const size_t size = (nbytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
  const c10::StreamId stream = getCurrentNPUStream(device_).id();

  processPending(/*synchronize=*/false);
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    block = takeFromPool(stream, size);
    if (block == nullptr) block = mallocBlock(stream, size);
    if (block != nullptr) markAllocated(block);
  }
  if (block == nullptr) {
    // Out of memory: give every cached block of this device back (pending
    // ones once their events completed) and retry once.
    releaseCached();
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.num_alloc_retries;
    block = takeFromPool(stream, size);
    if (block == nullptr) block = mallocBlock(stream, size);
    if (block == nullptr) {
      ++stats_.num_ooms;
      TORCH_CHECK_WITH(OutOfMemoryError, false, oomMessage(nbytes), NPU_ERROR_SUFFIX);
    }
    markAllocated(block);
  }
  allocator().ptrs().insert(block);
  return c10::DataPtr(block->ptr, block->ptr, &rawDelete, dev);
}

void DeviceState::free(Block* block) {
  // Phase 1 (locked): account, and return at once if no other stream used it.
  std::vector<StreamUse> uses;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocated_bytes -= static_cast<int64_t>(block->size);
    --stats_.active_blocks;
    if (block->uses.empty() && block->rawEvents.empty()) {
      toPool(block);
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
  if (leaked) {
    block->state = BlockState::kLeaked;
    block->rawEvents.clear();
    return;
  }
  for (NPUEvent& event : queued) block->queuedEvents.push_back(std::move(event));
  block->state = BlockState::kPending;
  pending_.push_back(block);
}

// Runs at every allocation: NPUEvent::query may drain the task queue, and so
// raise a failure the queue stored (the allocation then raises it, as any
// launch would); the blocks taken out are put back first.
void DeviceState::processPending(bool synchronize) {
  std::vector<Block*> work;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A synchronizing caller (the out-of-memory retry, empty_cache) must
    // also see the blocks another thread has taken out right now; otherwise
    // it finds the list empty and raises a spurious out-of-memory error.
    if (synchronize) pendingCv_.wait(lock, [&] { return takenOut_ == 0; });
    if (pending_.empty()) return;
    work.swap(pending_);
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
        toPool(block);
      } else {
        pending_.push_back(block);
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
      const NPUStream stream =
          NPUStream::unpack3(id, device_, c10::DeviceType::PrivateUse1);
      queue::waitSubmitted(stream);
      RawEvent::recordOn(stream.rawHandle())->synchronize();
    } catch (const c10::Error&) {
      unreachable.insert(id);  // e.g. a destroyed external stream: keep its blocks
    }
  }
  if (unreachable.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot.erase(std::remove_if(snapshot.begin(), snapshot.end(),
                                [&](const std::pair<void*, uint64_t>& entry) {
                                  auto it = blocks_.find(entry.first);
                                  return it == blocks_.end() ||
                                         unreachable.count(it->second->stream) != 0;
                                }),
                 snapshot.end());
}

void DeviceState::releaseCached() {
  processPending(/*synchronize=*/true);
  std::vector<std::pair<void*, uint64_t>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* block : pool_) snapshot.emplace_back(block->ptr, block->generation);
  }
  if (snapshot.empty()) return;
  // A cached block may still be used by work queued on its allocation
  // stream before it was freed (stream order makes reuse on that stream safe,
  // not a release), and npuFree, unlike cudaFree, does not wait for tasks.
  // So wait for those streams, through events: a device synchronize would
  // also take (and so lose) the failures of the device's streams.
  waitForStreams(snapshot);
  std::lock_guard<std::mutex> lock(mutex_);
  npuError_t firstError = npuSuccess;
  for (const auto& [ptr, generation] : snapshot) {
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) continue;
    Block* block = it->second.get();
    // Reused (and maybe freed again, with newer work) since the snapshot:
    // the synchronize above does not cover it.
    if (block->state != BlockState::kCached || block->generation != generation) continue;
    const npuError_t status = npuFree(ptr);
    if (status != npuSuccess) {
      if (firstError == npuSuccess) firstError = status;
      continue;  // keep the block: it is still ours
    }
    pool_.erase(block);
    --stats_.cached_blocks;
    stats_.reserved_bytes -= static_cast<int64_t>(block->size);
    blocks_.erase(it);
  }
  NPU_CHECK(firstError);
}

void DeviceState::recordStream(Block* block, const NPUStream& stream) {
  npuStream_t external = nullptr;
  if (stream.isExternal()) {
    allocator().subscribeOnce();
    external = stream.rawHandle();  // raises if the stream was destroyed
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream.device_index() == device_ && stream.id() == block->stream) return;
  TORCH_CHECK(external == nullptr || deadExternal_.count(external) == 0, "External NPU stream ",
              stream, " was destroyed by the library that created it and cannot be used any more.",
              NPU_ERROR_SUFFIX);
  for (const StreamUse& use : block->uses) {
    if (use.stream == stream) return;
  }
  block->uses.push_back(StreamUse{stream, external});
}

void DeviceState::eraseStream(Block* block, const NPUStream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& uses = block->uses;
  uses.erase(std::remove_if(uses.begin(), uses.end(),
                            [&](const StreamUse& u) { return u.stream == stream; }),
             uses.end());
}

std::optional<NPUStream> DeviceState::markStreamDead(npuStream_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  deadExternal_.insert(handle);
  for (const auto& [ptr, block] : blocks_) {
    for (const StreamUse& use : block->uses) {
      if (use.externalHandle == handle) return use.stream;
    }
  }
  return std::nullopt;
}

void DeviceState::replaceUses(npuStream_t handle, const std::shared_ptr<RawEvent>& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [ptr, block] : blocks_) {
    auto& uses = block->uses;
    auto it = std::remove_if(uses.begin(), uses.end(),
                             [&](const StreamUse& u) { return u.externalHandle == handle; });
    if (it == uses.end()) continue;
    uses.erase(it, uses.end());
    if (event != nullptr) block->rawEvents.push_back(event);
  }
}

std::string DeviceState::summary() {
  DeviceStats s;
  size_t pending = 0;
  size_t leaked = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = stats_;
    pending = pending_.size();
    for (const auto& [ptr, block] : blocks_) {
      if (block->state == BlockState::kLeaked) ++leaked;
    }
  }
  auto bytes = [](int64_t v) { return formatSize(static_cast<uint64_t>(std::max<int64_t>(v, 0))); };
  const std::string rule(75, '=');
  const std::string thin(75, '-');
  char line[160];
  std::ostringstream os;
  os << "|" << rule << "|\n";
  const std::string title = "NPU memory summary, device ID " + std::to_string(device_);
  std::snprintf(line, sizeof(line), "| %-73s |\n", title.c_str());
  os << line << "|" << thin << "|\n";
  std::snprintf(line, sizeof(line), "| %-33s | %-17s | %-17s |\n", "Metric", "Cur Usage",
                "Peak Usage");
  os << line << "|" << thin << "|\n";
  auto row = [&](const char* name, const std::string& cur, const std::string& peak) {
    std::snprintf(line, sizeof(line), "| %-33s | %17s | %17s |\n", name, cur.c_str(), peak.c_str());
    os << line;
  };
  row("Allocated memory", bytes(s.allocated_bytes), bytes(s.max_allocated_bytes));
  row("Reserved memory (allocated+cached)", bytes(s.reserved_bytes), bytes(s.max_reserved_bytes));
  row("Active blocks", std::to_string(s.active_blocks), "-");
  row("Cached (free) blocks", std::to_string(s.cached_blocks), "-");
  row("Freed blocks awaiting other streams", std::to_string(pending), "-");
  if (leaked != 0) row("Blocks never reused (event failure)", std::to_string(leaked), "-");
  os << "|" << thin << "|\n";
  row("Allocations served", std::to_string(s.num_allocs), "-");
  row("npuMalloc retries (cache released)", std::to_string(s.num_alloc_retries), "-");
  row("Out-of-memory errors", std::to_string(s.num_ooms), "-");
  os << "|" << rule << "|\n";
  return os.str();
}

// ---------------------------------------------------------------------------
// Stream-destroy notification
// ---------------------------------------------------------------------------

void CachingAllocator::onStreamDestroyed(npuStream_t handle, int /*device*/, void* userData) {
  // Runs on the destroying thread, before npurt invalidates the handle: the
  // stream still accepts an event record. Never throws across the C API.
  try {
    auto& self = *static_cast<CachingAllocator*>(userData);
    // Blocks of any device may list a stream of this device: visit all.
    // After markStreamDead, recordStream refuses the handle, so the uses
    // found below are all there will be.
    std::optional<NPUStream> stream;
    for (const auto& state : self.devices_) {
      auto found = state->markStreamDead(handle);
      if (!stream.has_value()) stream = found;
    }
    if (!stream.has_value()) return;
    // No lock held: see Note [Allocator lock ordering]. Waits without
    // reporting (a failure belongs to the stream's own synchronize).
    queue::waitSubmitted(*stream);
    std::shared_ptr<RawEvent> event;
    try {
      event = RawEvent::recordOn(handle);
    } catch (const c10::Error&) {
      // No event: wait for the stream now, so the blocks need none. The
      // stream is going away, so no later synchronize could report its
      // failure either.
      (void)npuStreamSynchronize(handle);
    }
    for (const auto& state : self.devices_) state->replaceUses(handle, event);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "NPU caching allocator: stream destroy notification failed: %s\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "NPU caching allocator: stream destroy notification failed\n");
  }
}

// ---------------------------------------------------------------------------
// c10::Allocator
// ---------------------------------------------------------------------------

// The DataPtr deleter (context = data pointer, as raw_allocate requires).
// Deleters run inside destructors and must not throw: a block whose free
// fails (only possible once the runtime is shutting down) is left to the
// process's exit.
void rawDelete(void* ptr) noexcept {
  if (ptr == nullptr) return;
  Block* block = allocator().ptrs().take(ptr);
  if (block == nullptr) {
    // A pointer this allocator never handed out (or freed twice): a broken
    // invariant of the caller. Leave the memory alone rather than corrupt it.
    std::fprintf(stderr, "NPU caching allocator: free of unknown pointer %p ignored\n", ptr);
    return;
  }
  try {
    allocator().device(block->device).free(block);
  } catch (...) {
    // The runtime shut down under us (process exit): nothing to return to.
  }
}

class NPUDeviceAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    int device = 0;
    NPU_CHECK(npuGetDevice(&device));
    return NPUCachingAllocator::allocate(nbytes, static_cast<c10::DeviceIndex>(device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) return;
    // npuMemcpy does not wait for streams; like cudaMemcpy (which waits for
    // the legacy default stream), make the copy see the work queued so far.
    int device = 0;
    NPU_CHECK(npuGetDevice(&device));
    device_synchronize(static_cast<c10::DeviceIndex>(device));
    NPU_CHECK(npuMemcpy(dest, src, count, npuMemcpyDeviceToDevice));
  }
};

// Leaked: c10 keeps the pointer until process exit.
NPUDeviceAllocator* deviceAllocator() {
  static NPUDeviceAllocator* instance = std::make_unique<NPUDeviceAllocator>().release();
  return instance;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, deviceAllocator())

Block* blockOf(const c10::DataPtr& ptr) {
  if (ptr.get() == nullptr || ptr.get_deleter() != &rawDelete) return nullptr;
  Block* block = allocator().ptrs().find(ptr.get());
  TORCH_INTERNAL_ASSERT(block != nullptr, "DataPtr ", ptr.get(),
                        " has the npu caching allocator's deleter but is not allocated; "
                        "was it freed through raw_deallocate while still owned?");
  return block;
}

}  // namespace

c10::Allocator* get() { return deviceAllocator(); }

c10::DataPtr allocate(size_t nbytes, c10::DeviceIndex device) {
  return allocator().device(device).allocate(nbytes);
}

void recordStream(const c10::DataPtr& ptr, NPUStream stream) {
  // Not ours (nullptr, from_blob, ...): nothing to protect, as CUDA does.
  Block* block = blockOf(ptr);
  if (block == nullptr) return;
  allocator().device(block->device).recordStream(block, stream);
}

bool isAllocatedOn(const c10::DataPtr& ptr, const NPUStream& stream) {
  const Block* block = blockOf(ptr);
  // device and stream are immutable while the block is allocated.
  return block != nullptr && block->device == stream.device_index() && block->stream == stream.id();
}

void eraseStream(const c10::DataPtr& ptr, NPUStream stream) {
  Block* block = blockOf(ptr);
  if (block == nullptr) return;
  allocator().device(block->device).eraseStream(block, stream);
}

void emptyCache() {
  for (const auto& state : allocator().devices()) state->releaseCached();
}

DeviceStats getDeviceStats(c10::DeviceIndex device) { return allocator().device(device).stats(); }

void resetPeakStats(c10::DeviceIndex device) { allocator().device(device).resetPeak(); }

void resetAccumulatedStats(c10::DeviceIndex device) {
  allocator().device(device).resetAccumulated();
}

std::string memorySummary(c10::DeviceIndex device) { return allocator().device(device).summary(); }

}  // namespace c10_npu::NPUCachingAllocator
