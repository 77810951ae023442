// Virtual memory of the simulated device: reservations, physical memory and
// mappings. See Note [Virtual memory] in csrc/npurt/README.md.
//
// On Linux it is real host virtual memory: a reservation is an mmap of
// PROT_NONE pages, physical memory a memfd (counted against its device's
// capacity), and a mapping an mmap(MAP_FIXED | MAP_SHARED) of the memfd over
// the reservation. Elsewhere every call is npuErrorNotSupported.
//
// Lifetimes: the VirtualMemory's maps hold the live reservations and
// mappings, its handle registry the unreleased physical memory. A Mapping
// holds its Reservation and PhysicalMemory; the memory manager's run of
// mapped memory (memory.h) holds the Mapping, and so does every queued copy
// or memset that checked an address in it. So npuMemUnmap, npuMemRelease and
// npuMemAddressFree drop only the registry's references: the pages go back
// to PROT_NONE (~Mapping), the capacity is returned (~PhysicalMemory) and the
// addresses given back (~Reservation) when the last user is done.
//
// A range unmapped while a queued copy still holds it may be mapped again
// before that copy ran: the Reservation records, per granule, which mapping
// owns its pages, and ~Mapping restores only the granules still its own.
//
// Locks: VirtualMemory::mutex_ (its maps), then the memory manager's mutex
// (addMapped/removeMapped), or a Reservation's mutex (its owners). ~Mapping
// takes only its Reservation's mutex, so a Mapping may be dropped under
// VirtualMemory::mutex_ but never under the memory manager's mutex.
//
// Thread safety: every VirtualMemory function is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "../handle_registry.h"
#include "../memory.h"
#include "npurt/npurt_vmm.h"

namespace npurt::internal {

// The unit of every size, address and offset (npuMemGetAllocationGranularity).
constexpr size_t kVmmGranularity = size_t{2} << 20;

// Physical memory of one npuMemCreate.
struct PhysicalMemory {
  PhysicalMemory(int memfd, size_t bytes, int deviceIndex, std::atomic<size_t>& used) noexcept
      : fd(memfd), size(bytes), device(deviceIndex), used_(used) {}
  PhysicalMemory(const PhysicalMemory&) = delete;
  PhysicalMemory& operator=(const PhysicalMemory&) = delete;
  ~PhysicalMemory();  // closes the memfd and returns the capacity

  const int fd;
  const size_t size;
  const int device;

 private:
  std::atomic<size_t>& used_;  // the device's allocated-bytes counter
};

// The addresses of one npuMemAddressReserve.
struct Reservation {
  Reservation(uintptr_t start, size_t bytes, uint64_t reservationId)
      : base(start), size(bytes), id(reservationId), owner(bytes / kVmmGranularity, 0) {}
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();  // gives the addresses back (munmap)

  const uintptr_t base;
  const size_t size;
  const uint64_t id;  // > 0, process-unique (the memory manager's run key)
  std::mutex mutex;   // guards owner
  // Per granule: the id of the mapping whose pages are there, 0 for none.
  std::vector<uint64_t> owner;
};

// One npuMemMap.
struct Mapping {
  Mapping(std::shared_ptr<Reservation> r, std::shared_ptr<PhysicalMemory> p, uintptr_t start,
          size_t bytes, uint64_t mappingId) noexcept
      : reservation(std::move(r)), physical(std::move(p)), begin(start), size(bytes),
        id(mappingId) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();  // PROT_NONE again where the pages are still its own

  const std::shared_ptr<Reservation> reservation;
  const std::shared_ptr<PhysicalMemory> physical;
  const uintptr_t begin;
  const size_t size;
  const uint64_t id;
};

class VirtualMemory {
 public:
  // The entry points of npurt_vmm.h after their argument checks that need
  // no state (NULL outputs, flags, prop): see there for the statuses.
  npuError_t reserve(void** ptr, size_t size, size_t alignment, void* hint, const char* function);
  npuError_t addressFree(void* ptr, size_t size, const char* function);
  // Physical memory on `device` (capacity and counter as for npuMalloc).
  npuError_t create(uint64_t* handle, size_t size, int device, size_t capacity,
                    std::atomic<size_t>& used, const char* function);
  npuError_t release(uint64_t handle, const char* function);
  npuError_t map(MemoryManager& memory, void* ptr, size_t size, size_t offset, uint64_t handle,
                 const char* function);
  npuError_t unmap(MemoryManager& memory, void* ptr, size_t size, const char* function);
  // The live mapping containing ptr: true and its range, or false.
  bool mappingRange(const void* ptr, void** base, size_t* size) const;

 private:
  // Caller holds mutex_. The live reservation containing [p, p + size), or null.
  std::shared_ptr<Reservation> reservationLocked(uintptr_t p, size_t size) const;
  // Caller holds mutex_. True if a live mapping overlaps [p, p + size).
  bool overlapsMappingLocked(uintptr_t p, size_t size) const;

  mutable std::mutex mutex_;  // guards the two maps
  std::map<uintptr_t, std::shared_ptr<Reservation>> reservations_;  // base -> reservation
  std::map<uintptr_t, std::shared_ptr<Mapping>> mappings_;  // live mappings by address
  HandleRegistry<PhysicalMemory> handles_{kMemHandleTag};   // unreleased physical memory
  std::atomic<uint64_t> nextId_{1};  // ids of reservations and mappings (relaxed: unique only)
};

}  // namespace npurt::internal
