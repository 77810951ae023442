/*
 * npurt — virtual memory management (Note [Virtual memory] in
 * csrc/npurt/README.md). Include it beside npurt/npurt.h (which it
 * includes). The conventions of npurt.h apply (statuses, last error message,
 * thread safety: every function may be called from any number of host
 * threads at once); npuMemUnmap, npuMemRelease and npuMemAddressFree
 * behave at process exit as npuFree does (they do nothing and return
 * npuSuccess). CUDA equivalents: the driver API's cuMem* functions.
 *
 * Address space and memory are apart: npuMemAddressReserve takes a range of
 * addresses that holds no memory, npuMemCreate makes physical memory (counted
 * against the device's capacity NPU_SIM_MEMORY_MB like npuMalloc), and
 * npuMemMap puts physical memory at addresses of a reservation. A mapped
 * address is device memory like npuMalloc's: copies, memsets, kernels and the
 * race detector accept it, and a copy may span adjacent mappings of one
 * reservation. An unmapped address is rejected like freed memory. Sizes,
 * addresses and offsets are multiples of the granularity
 * (npuMemGetAllocationGranularity, 2 MiB).
 *
 * Unlike CUDA, a mapping is readable and writable at once (there is no
 * npuMemSetAccess), and memory is never shared with other processes.
 */
#ifndef NPURT_NPURT_VMM_H_
#define NPURT_NPURT_VMM_H_

#include <stddef.h>
#include <stdint.h>

#include "npurt/npurt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Physical memory made by npuMemCreate: an opaque 64-bit handle, never
 * reused; NULL, garbage and released handles give
 * npuErrorInvalidResourceHandle. CUDA: CUmemGenericAllocationHandle. */
typedef struct npuMemHandle_st* npuMemGenericAllocationHandle_t;

/* CUDA: CUmemAllocationType. The simulated device has pinned memory only. */
typedef enum npuMemAllocationType { npuMemAllocationTypePinned = 1 } npuMemAllocationType;

/* CUDA: CUmemLocationType. Physical memory lives on a device. */
typedef enum npuMemLocationType { npuMemLocationTypeDevice = 1 } npuMemLocationType;

typedef struct npuMemLocation {
  npuMemLocationType type;
  int id; /* device ordinal */
} npuMemLocation;

/* CUDA: CUmemAllocationProp (without IPC handle types and flags). */
typedef struct npuMemAllocationProp {
  npuMemAllocationType type;
  npuMemLocation location;
} npuMemAllocationProp;

/* CUDA: CUmemAllocationGranularity_flags. Both give the same value here. */
typedef enum npuMemAllocationGranularityFlags {
  npuMemAllocationGranularityMinimum = 0,
  npuMemAllocationGranularityRecommended = 1
} npuMemAllocationGranularityFlags;

/* [out] granularity: the unit of every size, address and offset below, for
 * memory with the properties prop (a valid type and device, else
 * npuErrorInvalidValue / npuErrorInvalidDevice). CUDA:
 * cuMemGetAllocationGranularity. */
NPURT_API npuError_t npuMemGetAllocationGranularity(size_t* granularity,
                                                    const npuMemAllocationProp* prop,
                                                    npuMemAllocationGranularityFlags option);

/* [out] ptr: a range of size bytes of addresses holding no memory (any
 * access faults until something is mapped there). size: a multiple of the
 * granularity; alignment: 0 (the granularity) or a power of two multiple of
 * it; addr: a hint (NULL: none), honoured if that range is free; flags: 0.
 * npuErrorMemoryAllocation if the host has no address space left.
 * CUDA: cuMemAddressReserve. */
NPURT_API npuError_t npuMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr,
                                          unsigned long long flags);

/* Gives back a whole reservation: ptr its start, size its size. A
 * reservation that still has mappings → npuErrorInvalidValue (unmap them
 * first). CUDA: cuMemAddressFree. */
NPURT_API npuError_t npuMemAddressFree(void* ptr, size_t size);

/* [out] handle: size bytes (a multiple of the granularity) of physical
 * memory on device prop->location.id, counted against its capacity;
 * npuErrorMemoryAllocation if the capacity would be exceeded (as npuMalloc).
 * flags must be 0. CUDA: cuMemCreate. */
NPURT_API npuError_t npuMemCreate(npuMemGenericAllocationHandle_t* handle, size_t size,
                                  const npuMemAllocationProp* prop, unsigned long long flags);

/* Releases the handle. Memory still mapped stays usable (and counted) until
 * its last mapping is unmapped. CUDA: cuMemRelease. */
NPURT_API npuError_t npuMemRelease(npuMemGenericAllocationHandle_t handle);

/* Maps [offset, offset + size) of the handle's memory at [ptr, ptr + size),
 * which must lie in one reservation and overlap no mapping
 * (npuErrorInvalidValue otherwise, as are unaligned values and flags != 0).
 * The memory keeps its contents across unmap and map. The race detector
 * forgets the range's history (as for a new npuMalloc). CUDA: cuMemMap. */
NPURT_API npuError_t npuMemMap(void* ptr, size_t size, size_t offset,
                               npuMemGenericAllocationHandle_t handle, unsigned long long flags);

/* Unmaps [ptr, ptr + size), which must be exactly one or more whole,
 * adjacent mappings (npuErrorInvalidValue otherwise, e.g. a range that is
 * not mapped). Later copies and memsets of the range fail like freed memory;
 * copies already queued on it complete first (Note [Memory lifetime]).
 * Unlike CUDA, neither this nor npuMemMap waits for the device: order them
 * with the work that uses the range. CUDA: cuMemUnmap. */
NPURT_API npuError_t npuMemUnmap(void* ptr, size_t size);

/* [out] base, size (either may be NULL): the npuMalloc allocation or the
 * mapping that contains ptr. npuErrorInvalidDevicePointer if ptr is not
 * device memory. CUDA: cuMemGetAddressRange. */
NPURT_API npuError_t npuMemGetAddressRange(void** base, size_t* size, const void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPURT_NPURT_VMM_H_ */
