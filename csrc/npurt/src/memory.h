// Device memory and pinned host memory. See Note [Memory lifetime] in
// csrc/npurt/README.md.
//
// Device memory is 64-byte aligned host memory. Every live allocation is an
// Allocation in an ordered map keyed by base address, so that "which
// allocation contains p?" is one upper_bound. The map holds one reference;
// asynchronous copies and memsets hold more (task.h), so npuFree only
// removes the map's reference: the bytes and the device capacity are given
// back by ~Allocation, when the last task using them is done.
//
// Capacity is an atomic byte counter per device, reserved with a CAS loop
// before the host allocation (so two racing npuMalloc calls cannot both pass
// the limit) and returned by ~Allocation.
//
// Pinned host memory (npuMallocHost, npuHostRegister) is only bookkeeping:
// a second ordered map of ranges, used by npuPointerGetAttributes.
//
// Thread safety: every MemoryManager function is thread-safe: the maps are
// guarded by one shared_mutex (lookups, the frequent case, take it shared).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string_view>

#include "npurt/npurt.h"

namespace npurt::internal {

// One device allocation. Immutable after construction.
struct Allocation {
  Allocation(void* basePtr, size_t bytes, int deviceIndex, std::atomic<size_t>& used) noexcept
      : base(basePtr), size(bytes), device(deviceIndex), used_(used) {}
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();  // frees the bytes and returns the capacity

  // True if [p, p + count) lies inside this allocation.
  bool contains(const void* p, size_t count) const noexcept;

  void* const base;
  const size_t size;
  const int device;

 private:
  std::atomic<size_t>& used_;  // the device's allocated-bytes counter
};

// The result of checking a copy or memset: the allocations it touches (null
// for a host side), which an asynchronous task keeps alive.
struct CheckedRange {
  std::shared_ptr<Allocation> dst;
  std::shared_ptr<Allocation> src;
};

class MemoryManager {
 public:
  // Allocates `size` > 0 bytes on a device with capacity `capacity` whose
  // allocated-bytes counter is `used`. Returns npuErrorMemoryAllocation (with
  // the message set) if the capacity or the host runs out.
  npuError_t allocate(int device, size_t size, size_t capacity, std::atomic<size_t>& used,
                      void** out, const char* function);

  // npuFree: `ptr` must be the base of a live allocation.
  npuError_t free(void* ptr, const char* function);

  // Checks a copy (kind must be a valid enumerator): kind against the pointers, device ranges
  // against live allocations. On success fills `range`.
  npuError_t checkCopy(void* dst, const void* src, size_t count, npuMemcpyKind kind,
                       CheckedRange& range, const char* function) const;

  // Checks a memset of [ptr, ptr + count) of device memory.
  npuError_t checkMemset(void* ptr, size_t count, CheckedRange& range, const char* function) const;

  npuError_t mallocHost(size_t size, void** out, const char* function);
  npuError_t freeHost(void* ptr, const char* function);
  npuError_t hostRegister(void* ptr, size_t size, const char* function);
  npuError_t hostUnregister(void* ptr, const char* function);

  void attributes(const void* ptr, npuPointerAttributes& out) const;

 private:
  struct HostRange {
    size_t size;
    bool owned;  // npuMallocHost (freed by npuFreeHost) vs npuHostRegister
  };

  // Live allocation containing p (at any offset), or null. Caller holds mutex_.
  std::shared_ptr<Allocation> findLocked(const void* p) const;
  // Registered host range overlapping [p, p + size), or end(). Caller holds mutex_.
  std::map<uintptr_t, HostRange>::const_iterator findHostLocked(uintptr_t p, size_t size) const;

  mutable std::shared_mutex mutex_;                          // guards both maps
  std::map<uintptr_t, std::shared_ptr<Allocation>> device_;  // base -> allocation
  std::map<uintptr_t, HostRange> host_;                      // base -> pinned range
};

}  // namespace npurt::internal
