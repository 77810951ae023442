// User-supplied device allocators (torch_npu's NPUPluggableAllocator, CUDA's
// CUDAPluggableAllocator): a pair of C functions, usually from a .so loaded
// with ctypes, that obtain and release device memory.
//
// Layer: framework core.
//
// Note [Pluggable allocators]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A PluggableAllocator is used in one of two ways:
//  - as the current allocator (changeCurrentAllocator, before the caching
//    allocator served its first allocation): every npu allocation calls its
//    alloc function and every free its free function, with no caching. The
//    caching allocator's stream rules do not apply: recordStream is a no-op
//    and the op path holds such tensors until the tasks that use them ran
//    (Note [Task captures and memory reuse]), so a free function may release
//    memory at once. The switch is one-way, as in torch_npu: the pluggable
//    allocator is initialized as soon as it is current.
//  - as the segment source of a private pool (MemPool(allocator)): the
//    caching allocator calls alloc for each segment of the pool and free when
//    the segment is released (empty_cache), always after the work queued on
//    the segment's stream finished. The pool holds the allocator until its
//    last segment is released, so dropping the Python objects first is safe.
// The functions run on the allocating or freeing thread; for private pools
// under the caching allocator's device lock, so they must not allocate npu
// tensors themselves.
// A NULL result of alloc is an out-of-memory condition (the caching allocator
// retries after releasing its cache, then raises torch.OutOfMemoryError).
//
// Note [Pluggable allocator hooks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's C++ hooks of the current allocator, called where torch_npu
// calls them (each optional):
//  - record_stream / erase_stream: Tensor.record_stream and erase_stream of a
//    tensor of the current allocator, with the pointer and the NPUStream (our
//    c10_npu::NPUStream: an extension compiled against the package's headers
//    has the same type, which is what torch_npu's signature asks of it).
//  - base_alloc: NPUCachingAllocator::getBaseAllocation(ptr, &size); without
//    it the pointer is its own base.
//  - begin_allocate_to_pool / end_allocate_to_pool / release_pool: the
//    private-pool calls (use_mem_pool, graph capture) while the allocator is
//    current; the user's allocator decides what a pool means. The begin hook
//    gets a filter over aclrtStreams (std::function<bool(aclrtStream)>, as
//    torch_npu's) that answers for the calling thread's current stream of
//    the device (the stream its alloc function is given) and false for any
//    other handle. Without a begin hook, pools are refused with an error, as
//    before (torch_npu would silently ignore them). The caching allocator
//    keeps its own use count of the pool too, so MemPool.use_count() stays
//    true.
// These hooks only matter for the current allocator; a MemPool's segment
// source is never asked (torch_npu's caching allocator does not call them
// either).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/NPUStream.h"

namespace c10_npu::NPUPluggableAllocator {

// torch_npu's signatures; the stream is an aclrtStream (an npuStream_t here).
using AllocFn = void* (*)(size_t size, int device, void* stream);
using FreeFn = void (*)(void* ptr, size_t size, int device, void* stream);
// Optional functions a user may set (torch_npu's set_*_fn).
using DeviceStatsFn = c10::CachingDeviceAllocator::DeviceStats (*)(c10::DeviceIndex device);
using ResetPeakStatsFn = void (*)(c10::DeviceIndex device);
using InitFn = void (*)(int deviceCount);
using ResetFn = void (*)(bool checkError);
using MemoryFractionFn = void (*)(double fraction, int device);
// The C++ hooks (Note [Pluggable allocator hooks]), torch_npu's signatures.
using BaseAllocFn = void* (*)(void* ptr, size_t* size);
using StreamUseFn = void (*)(void* ptr, NPUStream stream);  // record and erase
// Filters take an aclrtStream (void*), as torch_npu's.
using StreamFilter = std::function<bool(void*)>;
using BeginAllocateToPoolFn = void (*)(int device, c10::MempoolId_t id, StreamFilter filter);
using PoolFn = void (*)(int device, c10::MempoolId_t id);  // end and release

class PluggableAllocator {
 public:
  // Raises ValueError if either function is null. Thread-safe.
  PluggableAllocator(AllocFn allocFn, FreeFn freeFn);

  // Calls alloc(size, device, stream); may return nullptr (out of memory).
  // Records the allocation for free. Thread-safe.
  void* malloc(size_t size, c10::DeviceIndex device, npuStream_t stream);
  // Calls free with what malloc recorded for `ptr`; raises for a pointer it
  // did not return. Thread-safe.
  void free(void* ptr);
  // alloc and free without bookkeeping: the segments of a private pool,
  // which the caching allocator tracks. Thread-safe.
  void* allocSegment(size_t size, c10::DeviceIndex device, npuStream_t stream);
  void freeSegment(void* ptr, size_t size, c10::DeviceIndex device, npuStream_t stream);
  // True if `ptr` is a live allocation of malloc. Thread-safe.
  bool owns(const void* ptr);

  // The optional functions; setting one replaces the previous. Thread-safe.
  void setDeviceStatsFn(DeviceStatsFn fn);
  void setResetPeakStatsFn(ResetPeakStatsFn fn);
  void setInitFn(InitFn fn);
  void setResetFn(ResetFn fn);
  void setMemoryFractionFn(MemoryFractionFn fn);
  void setBaseAllocFn(BaseAllocFn fn);
  void setRecordStreamFn(StreamUseFn fn);
  void setEraseStreamFn(StreamUseFn fn);
  void setBeginAllocateToPoolFn(BeginAllocateToPoolFn fn);
  void setEndAllocateToPoolFn(PoolFn fn);
  void setReleasePoolFn(PoolFn fn);

  // The hooks, called on the calling thread with no lock of ours held
  // (Note [Pluggable allocator hooks]); each does nothing if its function was
  // not set, except baseAllocation (returns ptr, size unchanged) and
  // beginAllocateToPool (raises: pools need a begin hook). Thread-safe.
  void* baseAllocation(void* ptr, size_t* size);
  void recordStream(void* ptr, const NPUStream& stream);
  void eraseStream(void* ptr, const NPUStream& stream);
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, StreamFilter filter);
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id);
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t id);

  // The statistics the user's function reports; all zero, with a warning
  // (once), if none was set. Thread-safe.
  c10::CachingDeviceAllocator::DeviceStats deviceStats(c10::DeviceIndex device);
  // Calls the user's function, or warns (once) that there is none. Thread-safe.
  void resetPeakStats(c10::DeviceIndex device);
  void emptyCache();
  void setMemoryFraction(double fraction, c10::DeviceIndex device);
  // Calls init_fn (if set) once; true afterwards. Thread-safe.
  void init(int deviceCount);
  bool initialized();

 private:
  struct Allocation {
    size_t size;
    c10::DeviceIndex device;
    npuStream_t stream;
  };
  const AllocFn alloc_;
  const FreeFn free_;
  std::mutex mutex_;  // guards live_ and initialized_
  std::unordered_map<void*, Allocation> live_;
  std::atomic<DeviceStatsFn> deviceStatsFn_{nullptr};
  std::atomic<ResetPeakStatsFn> resetPeakStatsFn_{nullptr};
  std::atomic<InitFn> initFn_{nullptr};
  std::atomic<ResetFn> resetFn_{nullptr};
  std::atomic<MemoryFractionFn> memoryFractionFn_{nullptr};
  std::atomic<BaseAllocFn> baseAllocFn_{nullptr};
  std::atomic<StreamUseFn> recordStreamFn_{nullptr};
  std::atomic<StreamUseFn> eraseStreamFn_{nullptr};
  std::atomic<BeginAllocateToPoolFn> beginAllocateToPoolFn_{nullptr};
  std::atomic<PoolFn> endAllocateToPoolFn_{nullptr};
  std::atomic<PoolFn> releasePoolFn_{nullptr};
  bool initialized_ = false;
};

// The current pluggable allocator, or nullptr while the caching allocator is
// in use. One acquire load. Thread-safe.
PluggableAllocator* current() noexcept;
// The current allocator as a shared pointer (nullptr: the caching allocator).
// Thread-safe.
std::shared_ptr<PluggableAllocator> currentShared();

// torch_npu's changeCurrentAllocator: from now on every npu allocation comes
// from `allocator` (Note [Pluggable allocators]). Raises "Can't swap an
// already initialized allocator" once the caching allocator has served an
// allocation, or if a pluggable allocator is current already. Thread-safe.
void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator, int deviceCount);

// Allocation through the current pluggable allocator `allocator` on
// `stream`: a DataPtr freed by deleter(). Raises torch.OutOfMemoryError if
// the alloc function returns NULL. Thread-safe.
c10::DataPtr allocate(PluggableAllocator& allocator, size_t nbytes, const NPUStream& stream);
// The DataPtr deleter of the current pluggable allocator (context = pointer).
c10::DeleterFnPtr deleter() noexcept;

}  // namespace c10_npu::NPUPluggableAllocator
