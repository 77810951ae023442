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
// Mapped virtual memory (Note [Virtual memory] in csrc/npurt/README.md) is
// in the same map, one Allocation per run of adjacent mappings of one
// reservation, so that a copy may span mappings; the run holds its mappings
// (MappedPiece::hold) and frees nothing itself. Runs are immutable too: a
// map or unmap replaces the runs it touches.
//
// Pinned host memory (npuMallocHost, npuHostRegister) is only bookkeeping:
// a second ordered map of ranges, used by npuPointerGetAttributes. A range
// registered mapped (Note [Mapped host memory]) is also in the device map,
// as an Allocation that frees nothing.
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
#include <vector>

#include "npurt/npurt.h"

namespace npurt::internal {

// One mapping of a run of mapped memory: its range and what keeps it mapped
// (the vmm Mapping, type-erased so that this file needs no vmm header).
struct MappedPiece {
  uintptr_t begin;
  size_t size;
  std::shared_ptr<const void> hold;
};

// One device allocation, or one run of mapped memory. Immutable after
// construction.
struct Allocation {
  // npuMalloc memory: the destructor frees it and returns the capacity.
  Allocation(void* basePtr, size_t bytes, int deviceIndex, std::atomic<size_t>& used) noexcept
      : base(basePtr), size(bytes), device(deviceIndex), used_(&used) {}
  // A run of adjacent mappings of reservation `reservationId` (> 0), by
  // address; the destructor only lets go of them.
  Allocation(int deviceIndex, uint64_t reservationId, std::vector<MappedPiece> runPieces);
  // Host memory mapped into a device (npuHostRegisterMapped; Note [Mapped
  // host memory]): the registration's owner frees it, not this.
  struct HostMapped {};
  Allocation(HostMapped, void* hostBase, size_t bytes, int deviceIndex) noexcept
      : base(hostBase), size(bytes), device(deviceIndex), hostMapped(true) {}
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();

  // True if [p, p + count) lies inside this allocation.
  bool contains(const void* p, size_t count) const noexcept;
  // True for a run of mapped memory.
  bool mapped() const noexcept { return reservation != 0; }

  void* const base;
  const size_t size;
  const int device;
  const uint64_t reservation = 0;       // 0 for npuMalloc memory
  const std::vector<MappedPiece> pieces;  // a run's mappings, by address
  const bool hostMapped = false;          // host memory mapped into the device

 private:
  std::atomic<size_t>* const used_ = nullptr;  // npuMalloc: the device's allocated-bytes counter
};

// Takes `size` bytes of a device's capacity (see above): `used` is its
// allocated-bytes counter. npuErrorMemoryAllocation (message set) if they
// are not free. Thread-safe.
npuError_t reserveCapacity(int device, size_t size, size_t capacity, std::atomic<size_t>& used,
                           const char* function);

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
  // `mapDevice` >= 0: npuHostRegisterMapped into that device.
  npuError_t hostRegister(void* ptr, size_t size, int mapDevice, const char* function);
  // npuHostGetDevicePointer: `ptr` inside a mapped registration.
  npuError_t hostDevicePointer(void* ptr, void** out, const char* function) const;
  npuError_t hostUnregister(void* ptr, const char* function);

  void attributes(const void* ptr, npuPointerAttributes& out) const;

  // --- vmm/mapped_runs.cpp: Note [Virtual memory] ---
  // Adds `piece` (on `device`, of reservation `reservationId`) as mapped
  // memory, merged with the runs of that reservation that touch it. Returns
  // the runs it replaced: drop them after every lock is released (their
  // mappings' destructors take a lock).
  std::vector<std::shared_ptr<Allocation>> addMapped(MappedPiece piece, int device,
                                                     uint64_t reservationId);
  // Removes [begin, begin + size), whole pieces of one run (the caller
  // checked), splitting the run. Returns the run it replaced (as above).
  std::vector<std::shared_ptr<Allocation>> removeMapped(uintptr_t begin, size_t size);

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
