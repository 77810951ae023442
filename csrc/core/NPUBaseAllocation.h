// torch_npu's NPUCachingAllocator::getBaseAllocation. Shipped in the package's
// include/ (the SDK's NPUCachingAllocator.h includes it).
//
// Layer: framework core.
#pragma once

#include <cstddef>

namespace c10_npu::NPUCachingAllocator {

// The start of the segment (the npuMalloc'd memory) that holds the live
// allocation `ptr`, and in *size that segment's size. Raises for a pointer
// the caching allocator did not hand out (ValueError for a NULL size) and for
// blocks of expandable segments (torch_npu's rule: their memory cannot be
// shared). With a pluggable allocator current, its base_alloc hook answers,
// or the pointer is its own base and *size is left alone (Note [Pluggable
// allocator hooks] in NPUPluggableAllocator.h). Thread-safe.
void* getBaseAllocation(void* ptr, size_t* size);

}  // namespace c10_npu::NPUCachingAllocator
