// Swapped memory: npu tensors whose memory is host memory mapped into the
// device (torch_npu's NPUSwappedMemoryAllocator, behind
// torch_npu.empty_with_swapped_memory). Large tensors that do not fit the
// device's memory can live in host memory and still be used by npu ops in
// place, without copies.
//
// Layer: framework core.
//
// Note [Swapped memory]
// ~~~~~~~~~~~~~~~~~~~~~
// An allocation is page-aligned host memory registered with npurt as mapped
// host memory of the current device (npuHostRegisterMapped, Note [Mapped
// host memory] in csrc/npurt/README.md): copies, memsets and op tasks take it
// as device memory, so the tensor behaves as any npu tensor, and it is not
// counted in the device's memory or in the caching allocator's statistics.
// The memory is not cached: each free unregisters and frees it. A queued op
// holds the storage of memory the caching allocator does not manage until it
// ran (Note [Memory held by queued tasks] in core/NPUCachingAllocator.h), so
// the free never races the device; torch_npu synchronizes the whole device
// at every free instead.
#pragma once

#include <c10/core/Allocator.h>

namespace c10_npu::NPUSwappedMemoryAllocator {

// The allocator: allocate(n) gives n bytes (rounded up to whole pages) of
// mapped host memory on the current device. A failure to get or register the
// memory raises c10::OutOfMemoryError / c10::Error naming the size.
// Thread-safe.
c10::Allocator* get();

}  // namespace c10_npu::NPUSwappedMemoryAllocator
