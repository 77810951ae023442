// Reservations, physical memory and mappings. See virtual_memory.h and Note
// [Virtual memory] in csrc/npurt/README.md.
#include "virtual_memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include "../errors.h"

namespace npurt::internal {
namespace {

std::string hex(uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(p));
  return buf;
}

std::string range(uintptr_t p, size_t size) {
  return "[" + hex(p) + ", +" + std::to_string(size) + ")";
}

bool aligned(uintptr_t value) { return value % kVmmGranularity == 0; }

npuError_t unaligned(const char* function, const char* what, uintptr_t value) {
  return fail(npuErrorInvalidValue, function,
              std::string(what) + " " + std::to_string(value) +
                  " is not a multiple of the granularity (" + std::to_string(kVmmGranularity) +
                  " bytes, npuMemGetAllocationGranularity)");
}

#if defined(__linux__)
constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// PROT_NONE pages over [p, p + size): unmapped addresses of a reservation.
bool protectNone(uintptr_t p, size_t size) {
  void* at = reinterpret_cast<void*>(p);
  return mmap(at, size, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0) == at;
}

// size + alignment bytes of PROT_NONE pages (mmap aligns to a host page
// only), trimmed to an aligned range of size bytes; 0 if the host has no
// address space left.
uintptr_t reserveAligned(size_t size, size_t alignment) {
  const size_t slack = alignment;
  if (size > SIZE_MAX - slack) return 0;
  void* raw = mmap(nullptr, size + slack, PROT_NONE, kReserveFlags, -1, 0);
  if (raw == MAP_FAILED) return 0;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  // The host page size divides the granularity, so only whole pages are trimmed.
  const uintptr_t base = (start + alignment - 1) / alignment * alignment;
  if (base > start) munmap(raw, base - start);
  const uintptr_t tail = start + size + slack - (base + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(base + size), tail);
  return base;
}
#endif

}  // namespace

PhysicalMemory::~PhysicalMemory() {
#if defined(__linux__)
  close(fd);
#endif
  // relaxed: as ~Allocation (memory.cpp).
  used_.fetch_sub(size, std::memory_order_relaxed);
}

Reservation::~Reservation() {
#if defined(__linux__)
  munmap(reinterpret_cast<void*>(base), size);
#endif
}

Mapping::~Mapping() {
#if defined(__linux__)
  // Only the granules no later mapping took (see virtual_memory.h); runs of
  // them in one call each.
  std::lock_guard<std::mutex> lock(reservation->mutex);
  const size_t first = (begin - reservation->base) / kVmmGranularity;
  const size_t count = size / kVmmGranularity;
  size_t i = first;
  while (i < first + count) {
    if (reservation->owner[i] != id) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < first + count && reservation->owner[j] == id) reservation->owner[j++] = 0;
    // If this fails (no host memory for the kernel's bookkeeping), the pages
    // stay readable until the reservation is freed: nothing worse.
    (void)protectNone(reservation->base + i * kVmmGranularity, (j - i) * kVmmGranularity);
    i = j;
  }
#endif
}

npuError_t VirtualMemory::reserve(void** ptr, size_t size, size_t alignment, void* hint,
                                  const char* function) {
#if defined(__linux__)
  if (size == 0 || !aligned(size)) return unaligned(function, "size", size);
  if (alignment == 0) alignment = kVmmGranularity;
  if (!aligned(alignment) || (alignment & (alignment - 1)) != 0) {
    return fail(npuErrorInvalidValue, function,
                "alignment " + std::to_string(alignment) +
                    " is not 0 or a power of two multiple of the granularity (" +
                    std::to_string(kVmmGranularity) + " bytes)");
  }
  uintptr_t base = 0;
  const auto want = reinterpret_cast<uintptr_t>(hint);
  if (want != 0 && want % alignment == 0) {
    // A hint only: taken if the kernel gives exactly that range.
    void* got = mmap(hint, size, PROT_NONE, kReserveFlags, -1, 0);
    if (got == hint) {
      base = want;
    } else if (got != MAP_FAILED) {
      munmap(got, size);
    }
  }
  if (base == 0) base = reserveAligned(size, alignment);
  if (base == 0) {
    return fail(npuErrorMemoryAllocation, function,
                "no host address space left for " + std::to_string(size) + " bytes (" +
                    std::strerror(errno) + ")");
  }
  std::shared_ptr<Reservation> reservation;
  try {
    reservation = std::make_shared<Reservation>(base, size, nextId_.fetch_add(1));
  } catch (...) {
    munmap(reinterpret_cast<void*>(base), size);
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  reservations_.emplace(base, std::move(reservation));  // on bad_alloc ~Reservation unmaps
  *ptr = reinterpret_cast<void*>(base);
  return npuSuccess;
#else
  (void)ptr, (void)size, (void)alignment, (void)hint;
  return fail(npuErrorNotSupported, function, "virtual memory needs Linux on the simulator");
#endif
}

npuError_t VirtualMemory::addressFree(void* ptr, size_t size, const char* function) {
  std::shared_ptr<Reservation> victim;  // dropped after the lock (it may munmap)
  std::lock_guard<std::mutex> lock(mutex_);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  const auto it = reservations_.find(p);
  if (it == reservations_.end()) {
    return fail(npuErrorInvalidValue, function,
                hex(p) + " is not the start of a reservation (npuMemAddressReserve)");
  }
  if (it->second->size != size) {
    return fail(npuErrorInvalidValue, function,
                "size " + std::to_string(size) + " is not the reservation's size " +
                    std::to_string(it->second->size) + "; a reservation is freed whole");
  }
  if (overlapsMappingLocked(p, size)) {
    return fail(npuErrorInvalidValue, function,
                "reservation " + range(p, size) + " still has mappings: npuMemUnmap them first");
  }
  victim = std::move(it->second);
  reservations_.erase(it);
  return npuSuccess;
}

npuError_t VirtualMemory::create(uint64_t* handle, size_t size, int device, size_t capacity,
                                 std::atomic<size_t>& used, const char* function) {
#if defined(__linux__)
  if (size == 0 || !aligned(size)) return unaligned(function, "size", size);
  if (const npuError_t s = reserveCapacity(device, size, capacity, used, function);
      s != npuSuccess) {
    return s;
  }
  const int fd = memfd_create("npurt-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    used.fetch_sub(size, std::memory_order_relaxed);
    return fail(npuErrorMemoryAllocation, function,
                "host memory for " + std::to_string(size) + " bytes of physical memory: " +
                    std::strerror(error));
  }
  std::shared_ptr<PhysicalMemory> memory;
  try {
    memory = std::make_shared<PhysicalMemory>(fd, size, device, used);
  } catch (...) {
    close(fd);
    used.fetch_sub(size, std::memory_order_relaxed);
    throw;
  }
  const uint64_t id = handles_.newId();
  handles_.insert(id, std::move(memory));  // on bad_alloc ~PhysicalMemory gives all back
  *handle = handles_.toHandle(id);
  return npuSuccess;
#else
  (void)handle, (void)size, (void)device, (void)capacity, (void)used;
  return fail(npuErrorNotSupported, function, "virtual memory needs Linux on the simulator");
#endif
}

npuError_t VirtualMemory::release(uint64_t handle, const char* function) {
  // Mappings keep the memory (and its capacity) until they are unmapped.
  if (handles_.erase(handles_.toId(handle)) == nullptr) {
    return fail(npuErrorInvalidResourceHandle, function,
                "invalid physical memory handle " + hex(handle) + " (released already?)");
  }
  return npuSuccess;
}

std::shared_ptr<Reservation> VirtualMemory::reservationLocked(uintptr_t p, size_t size) const {
  auto it = reservations_.upper_bound(p);
  if (it == reservations_.begin()) return nullptr;
  --it;
  const Reservation& r = *it->second;
  if (p - r.base >= r.size || size > r.size - (p - r.base)) return nullptr;
  return it->second;
}

bool VirtualMemory::overlapsMappingLocked(uintptr_t p, size_t size) const {
  auto it = mappings_.lower_bound(p);
  if (it != mappings_.end() && it->first - p < size) return true;
  if (it == mappings_.begin()) return false;
  --it;
  return p - it->first < it->second->size;
}

npuError_t VirtualMemory::map(MemoryManager& memory, void* ptr, size_t size, size_t offset,
                              uint64_t handle, const char* function) {
#if defined(__linux__)
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (!aligned(p)) return unaligned(function, "address", p);
  if (size == 0 || !aligned(size)) return unaligned(function, "size", size);
  if (!aligned(offset)) return unaligned(function, "offset", offset);
  std::shared_ptr<PhysicalMemory> physical = handles_.find(handles_.toId(handle));
  if (physical == nullptr) {
    return fail(npuErrorInvalidResourceHandle, function,
                "invalid physical memory handle " + hex(handle) + " (released already?)");
  }
  if (offset > physical->size || size > physical->size - offset) {
    return fail(npuErrorInvalidValue, function,
                "[offset " + std::to_string(offset) + ", +" + std::to_string(size) +
                    ") overruns the physical memory of " + std::to_string(physical->size) +
                    " bytes");
  }
  std::vector<std::shared_ptr<Allocation>> replaced;  // dropped after the locks
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Reservation> reservation = reservationLocked(p, size);
  if (reservation == nullptr) {
    return fail(npuErrorInvalidValue, function,
                range(p, size) + " does not lie inside one reservation (npuMemAddressReserve)");
  }
  if (overlapsMappingLocked(p, size)) {
    return fail(npuErrorInvalidValue, function,
                range(p, size) + " overlaps a mapping: npuMemUnmap it first");
  }
  auto mapping = std::make_shared<Mapping>(reservation, physical, p, size, nextId_.fetch_add(1));
  {
    std::lock_guard<std::mutex> owners(reservation->mutex);
    if (mmap(ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, physical->fd,
             static_cast<off_t>(offset)) != ptr) {
      return fail(npuErrorMemoryAllocation, function,
                  "mmap of " + range(p, size) + " failed: " + std::strerror(errno));
    }
    const size_t first = (p - reservation->base) / kVmmGranularity;
    for (size_t i = first; i < first + size / kVmmGranularity; ++i) {
      reservation->owner[i] = mapping->id;
    }
  }
  // From here, dropping `mapping` on an exception puts PROT_NONE back.
  auto entry = mappings_.emplace(p, mapping).first;
  try {
    replaced = memory.addMapped(MappedPiece{p, size, mapping}, physical->device, reservation->id);
  } catch (...) {
    mappings_.erase(entry);
    throw;
  }
  return npuSuccess;
#else
  (void)memory, (void)ptr, (void)size, (void)offset, (void)handle;
  return fail(npuErrorNotSupported, function, "virtual memory needs Linux on the simulator");
#endif
}

npuError_t VirtualMemory::unmap(MemoryManager& memory, void* ptr, size_t size,
                                const char* function) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (!aligned(p)) return unaligned(function, "address", p);
  if (size == 0 || !aligned(size)) return unaligned(function, "size", size);
  if (size > UINTPTR_MAX - p) {
    return fail(npuErrorInvalidValue, function, "range wraps around the address space");
  }
  std::vector<std::shared_ptr<Mapping>> gone;  // dropped after the lock, as `replaced`
  std::vector<std::shared_ptr<Allocation>> replaced;
  std::lock_guard<std::mutex> lock(mutex_);
  // Whole mappings, back to back, from p to exactly p + size.
  uintptr_t at = p;
  while (at < p + size) {
    const auto it = mappings_.find(at);
    if (it == mappings_.end()) {
      return fail(npuErrorInvalidValue, function,
                  range(p, size) + " is not whole mappings: nothing is mapped from " + hex(at));
    }
    at += it->second->size;
  }
  if (at != p + size) {
    return fail(npuErrorInvalidValue, function,
                range(p, size) + " ends inside a mapping that ends at " + hex(at));
  }
  gone.reserve(size / kVmmGranularity);
  replaced = memory.removeMapped(p, size);
  for (at = p; at < p + size;) {
    auto node = mappings_.extract(at);  // no allocation, cannot throw
    at += node.mapped()->size;
    gone.push_back(std::move(node.mapped()));
  }
  return npuSuccess;
}

bool VirtualMemory::mappingRange(const void* ptr, void** base, size_t* size) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = mappings_.upper_bound(p);
  if (it == mappings_.begin()) return false;
  --it;
  if (p - it->first >= it->second->size) return false;
  if (base != nullptr) *base = reinterpret_cast<void*>(it->first);
  if (size != nullptr) *size = it->second->size;
  return true;
}

}  // namespace npurt::internal
