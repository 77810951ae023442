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
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "core/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

// Memory statistics of one device, named as torch.cuda.memory_stats names
// them ("allocated_bytes.all.current", ...). All values are bytes or counts.
struct DeviceStats {
  int64_t allocated_bytes = 0;  // in use by tensors
  int64_t max_allocated_bytes = 0;
  int64_t reserved_bytes = 0;  // held from npurt (in use + cached)
  int64_t max_reserved_bytes = 0;
  int64_t active_blocks = 0;      // blocks in use
  int64_t cached_blocks = 0;      // free blocks held for reuse
  int64_t num_alloc_retries = 0;  // npuMalloc failures that freed the cache and retried
  int64_t num_ooms = 0;           // allocations that raised OutOfMemoryError
  int64_t num_allocs = 0;         // total allocations served
};

// The c10::Allocator registered for DeviceType::PrivateUse1. Thread-safe.
c10::Allocator* get();

// Allocates on the current stream of `device`. Raises torch.OutOfMemoryError
// (naming the requested size, capacity, allocated and reserved bytes) if
// npurt is out of memory even after the cache was released. Thread-safe.
c10::DataPtr allocate(size_t nbytes, c10::DeviceIndex device);

// Tensor.record_stream: the block behind `ptr` (a pointer returned by this
// allocator) must not be reused until the work queued on `stream` up to the
// moment of its free has completed. Thread-safe.
void recordStream(const c10::DataPtr& ptr, NPUStream stream);

// True if `ptr` is a live block of this allocator allocated on `stream`: a
// task queued on `stream` may then use the memory without holding it (see
// Note [Task captures and memory reuse] in csrc/aten/OpTask.cpp).
// False for other streams and for memory this allocator did not hand out.
// Thread-safe; the caller keeps `ptr` alive during the call.
bool isAllocatedOn(const c10::DataPtr& ptr, const NPUStream& stream);

// torch_npu.erase_stream: removes a use recorded with recordStream. Thread-safe.
void eraseStream(const c10::DataPtr& ptr, NPUStream stream);

// Releases all cached (unused) blocks of every device back to npurt.
// Thread-safe.
void emptyCache();

DeviceStats getDeviceStats(c10::DeviceIndex device);
void resetPeakStats(c10::DeviceIndex device);
void resetAccumulatedStats(c10::DeviceIndex device);

// Human-readable summary (torch.npu.memory_summary).
std::string memorySummary(c10::DeviceIndex device);

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

// Bytes of pinned memory held from npurt (in use and cached) and in use, by
// rounded block size (Note [Pinned block sizes]). Thread-safe.
struct HostStats {
  int64_t reserved_bytes = 0;
  int64_t allocated_bytes = 0;
};
HostStats stats();

}  // namespace c10_npu::NPUHostAllocator
