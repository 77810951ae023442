// Device allocations, pinned host ranges, and copy/memset checks.
// See memory.h and Note [Memory lifetime] in csrc/npurt/README.md.
#include "memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "errors.h"

namespace npurt::internal {
namespace {

constexpr size_t kAlignment = 64;

std::string describe(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// True if every page of [p, p + size) is mapped in this process (size > 0,
// no wrap-around). mincore fails with ENOMEM on a range with an unmapped
// page; it is asked a bounded number of pages at a time so that a huge range
// needs no huge vector. Elsewhere than Linux: assumed mapped.
bool rangeIsMapped(uintptr_t p, size_t size) {
#if defined(__linux__)
  const long pageSize = sysconf(_SC_PAGESIZE);
  const uintptr_t page = pageSize > 0 ? static_cast<uintptr_t>(pageSize) : 4096;
  constexpr uintptr_t kPagesPerCall = 4096;
  unsigned char residency[kPagesPerCall];
  uintptr_t at = p & ~(page - 1);
  const uintptr_t end = p + size;  // the caller checked that it does not wrap
  while (at < end) {
    const uintptr_t pages = std::min<uintptr_t>((end - at + page - 1) / page, kPagesPerCall);
    if (mincore(reinterpret_cast<void*>(at), pages * page, residency) != 0) {
      if (errno == ENOMEM) return false;
      return true;  // another error (e.g. EAGAIN): nothing says it is unmapped
    }
    at += pages * page;
  }
#else
  (void)p;
  (void)size;
#endif
  return true;
}

// std::aligned_alloc wants a multiple of the alignment; false on overflow.
bool roundUp(size_t size, size_t& rounded) {
  if (size > SIZE_MAX - (kAlignment - 1)) return false;
  rounded = (size + kAlignment - 1) & ~(kAlignment - 1);
  return true;
}

const char* kindName(npuMemcpyKind kind) {
  switch (kind) {
    case npuMemcpyHostToHost:
      return "npuMemcpyHostToHost";
    case npuMemcpyHostToDevice:
      return "npuMemcpyHostToDevice";
    case npuMemcpyDeviceToHost:
      return "npuMemcpyDeviceToHost";
    case npuMemcpyDeviceToDevice:
      return "npuMemcpyDeviceToDevice";
    case npuMemcpyDefault:
      return "npuMemcpyDefault";
  }
  return "?";
}

}  // namespace

Allocation::Allocation(int deviceIndex, uint64_t reservationId, std::vector<MappedPiece> runPieces)
    : base(reinterpret_cast<void*>(runPieces.front().begin)),
      size(runPieces.back().begin + runPieces.back().size - runPieces.front().begin),
      device(deviceIndex),
      reservation(reservationId),
      pieces(std::move(runPieces)) {}

Allocation::~Allocation() {
  if (used_ == nullptr) return;  // a run (its pieces unmap themselves) or mapped host memory
  std::free(base);
  // relaxed: the counter is a statistic and a limit; the CAS in
  // reserveCapacity() needs no ordering with the memory itself.
  used_->fetch_sub(size, std::memory_order_relaxed);
}

bool Allocation::contains(const void* p, size_t count) const noexcept {
  const auto begin = reinterpret_cast<uintptr_t>(base);
  const auto q = reinterpret_cast<uintptr_t>(p);
  // Written to avoid overflow of q + count.
  return q >= begin && q - begin <= size && count <= size - (q - begin);
}

npuError_t reserveCapacity(int device, size_t size, size_t capacity, std::atomic<size_t>& used,
                           const char* function) {
  size_t current = used.load(std::memory_order_relaxed);
  do {
    if (size > capacity - current) {
      return fail(npuErrorMemoryAllocation, function,
                  "out of device memory on device " + std::to_string(device) + ": requested " +
                      std::to_string(size) + " bytes, " + std::to_string(capacity - current) +
                      " of " + std::to_string(capacity) + " bytes free");
    }
  } while (!used.compare_exchange_weak(current, current + size, std::memory_order_relaxed));
  return npuSuccess;
}

npuError_t MemoryManager::allocate(int device, size_t size, size_t capacity,
                                   std::atomic<size_t>& used, void** out, const char* function) {
  // Reserve capacity first (see memory.h).
  if (const npuError_t s = reserveCapacity(device, size, capacity, used, function);
      s != npuSuccess) {
    return s;
  }

  size_t rounded = 0;
  void* base = roundUp(size, rounded) ? std::aligned_alloc(kAlignment, rounded) : nullptr;
  if (base == nullptr) {
    used.fetch_sub(size, std::memory_order_relaxed);
    return fail(npuErrorMemoryAllocation, function,
                "host allocation of " + std::to_string(size) + " bytes failed");
  }
  std::shared_ptr<Allocation> allocation;
  try {
    allocation = std::make_shared<Allocation>(base, size, device, used);
  } catch (...) {
    std::free(base);
    used.fetch_sub(size, std::memory_order_relaxed);
    throw;
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  device_.emplace(reinterpret_cast<uintptr_t>(base), std::move(allocation));
  *out = base;
  return npuSuccess;
}

npuError_t MemoryManager::free(void* ptr, const char* function) {
  std::shared_ptr<Allocation> victim;  // released after the lock
  {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    const auto it = device_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == device_.end()) {
      lock.unlock();
      return fail(npuErrorInvalidDevicePointer, function,
                  describe(ptr) + " is not the start of a live device allocation");
    }
    if (it->second->mapped()) {
      lock.unlock();
      return fail(npuErrorInvalidDevicePointer, function,
                  describe(ptr) + " is mapped virtual memory (npuMemMap): unmap it with "
                                  "npuMemUnmap instead of freeing it");
    }
    if (it->second->hostMapped) {
      lock.unlock();
      return fail(npuErrorInvalidDevicePointer, function,
                  describe(ptr) + " is host memory registered with npuHostRegisterMapped: "
                                  "npuHostUnregister it instead of freeing it");
    }
    victim = std::move(it->second);
    device_.erase(it);
  }
  return npuSuccess;
}

std::shared_ptr<Allocation> MemoryManager::findLocked(const void* p) const {
  const auto key = reinterpret_cast<uintptr_t>(p);
  auto it = device_.upper_bound(key);
  if (it == device_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  if (key - it->first < a.size) return it->second;
  return nullptr;
}

npuError_t MemoryManager::checkCopy(void* dst, const void* src, size_t count, npuMemcpyKind kind,
                                    CheckedRange& range, const char* function) const {
  if (dst == nullptr || src == nullptr) {
    return fail(npuErrorInvalidValue, function,
                std::string(dst == nullptr ? "dst" : "src") + " is NULL");
  }
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    range.dst = findLocked(dst);
    range.src = findLocked(src);
  }
  // Each side is either expected on the device, expected on the host, or
  // inferred (npuMemcpyDefault).
  struct Side {
    const char* label;
    const void* ptr;
    const std::shared_ptr<Allocation>& alloc;
    bool wantDevice;
  };
  const bool inferred = kind == npuMemcpyDefault;
  const Side sides[2] = {
      {"dst", dst, range.dst, kind == npuMemcpyHostToDevice || kind == npuMemcpyDeviceToDevice},
      {"src", src, range.src, kind == npuMemcpyDeviceToHost || kind == npuMemcpyDeviceToDevice},
  };
  // Device memory where the kind says host is a direction error first: with
  // swapped pointers both rules fire, and "wrong direction" is the better
  // diagnosis. A non-device pointer where the kind says device is then a bad
  // device pointer (typically freed or garbage).
  if (!inferred) {
    for (const Side& side : sides) {
      // Mapped host memory is host memory too (Note [Mapped host memory]).
      if (!side.wantDevice && side.alloc != nullptr && !side.alloc->hostMapped) {
        return fail(npuErrorInvalidMemcpyDirection, function,
                    std::string(side.label) + " " + describe(side.ptr) +
                        " is device memory but kind " + kindName(kind) + " says host");
      }
    }
    for (const Side& side : sides) {
      if (side.wantDevice && side.alloc == nullptr) {
        return fail(npuErrorInvalidDevicePointer, function,
                    std::string(side.label) + " " + describe(side.ptr) +
                        " is not inside a live device allocation (kind " + kindName(kind) + ")");
      }
    }
  }
  for (const Side& side : sides) {
    if (side.alloc != nullptr && !side.alloc->contains(side.ptr, count)) {
      return fail(npuErrorInvalidDevicePointer, function,
                  std::string(side.label) + " range [" + describe(side.ptr) + ", +" +
                      std::to_string(count) + ") overruns its allocation of " +
                      std::to_string(side.alloc->size) + " bytes at " + describe(side.alloc->base));
    }
  }
  return npuSuccess;
}

npuError_t MemoryManager::checkMemset(void* ptr, size_t count, CheckedRange& range,
                                      const char* function) const {
  if (ptr == nullptr) return fail(npuErrorInvalidValue, function, "devPtr is NULL");
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    range.dst = findLocked(ptr);
  }
  if (range.dst == nullptr) {
    return fail(npuErrorInvalidDevicePointer, function,
                describe(ptr) + " is not inside a live device allocation");
  }
  if (!range.dst->contains(ptr, count)) {
    return fail(npuErrorInvalidDevicePointer, function,
                "range [" + describe(ptr) + ", +" + std::to_string(count) +
                    ") overruns its allocation of " + std::to_string(range.dst->size) +
                    " bytes at " + describe(range.dst->base));
  }
  return npuSuccess;
}

std::map<uintptr_t, MemoryManager::HostRange>::const_iterator MemoryManager::findHostLocked(
    uintptr_t p, size_t size) const {
  // The range starting at or before p, then the one after it.
  auto it = host_.upper_bound(p);
  if (it != host_.begin()) {
    auto prev = std::prev(it);
    if (p - prev->first < prev->second.size) return prev;
  }
  if (it != host_.end() && it->first - p < size) return it;
  return host_.end();
}

npuError_t MemoryManager::mallocHost(size_t size, void** out, const char* function) {
  size_t rounded = 0;
  void* base = roundUp(size, rounded) ? std::aligned_alloc(kAlignment, rounded) : nullptr;
  if (base == nullptr) {
    return fail(npuErrorMemoryAllocation, function,
                "pinned host allocation of " + std::to_string(size) + " bytes failed");
  }
  try {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    host_.emplace(reinterpret_cast<uintptr_t>(base), HostRange{size, true});
  } catch (...) {
    std::free(base);
    throw;
  }
  *out = base;
  return npuSuccess;
}

npuError_t MemoryManager::freeHost(void* ptr, const char* function) {
  {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    const auto it = host_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != host_.end() && it->second.owned) {
      host_.erase(it);
      lock.unlock();
      std::free(ptr);
      return npuSuccess;
    }
  }
  return fail(npuErrorInvalidValue, function,
              describe(ptr) + " was not returned by npuMallocHost (or was freed already)");
}

npuError_t MemoryManager::hostRegister(void* ptr, size_t size, int mapDevice,
                                       const char* function) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (size > UINTPTR_MAX - p) {
    return fail(npuErrorInvalidValue, function, "range wraps around the address space");
  }
  if (!rangeIsMapped(p, size)) {
    return fail(npuErrorInvalidValue, function,
                "[" + describe(ptr) + ", +" + std::to_string(size) +
                    ") is not mapped memory (or not all of it is)");
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (findHostLocked(p, size) != host_.end()) {
    lock.unlock();
    return fail(
        npuErrorHostMemoryAlreadyRegistered, function,
        "[" + describe(ptr) + ", +" + std::to_string(size) + ") overlaps a registered host range");
  }
  if (findLocked(ptr) != nullptr) {
    lock.unlock();
    return fail(npuErrorInvalidValue, function, describe(ptr) + " is device memory");
  }
  // A mapped range joins the device map, whose entries must not overlap
  // (findLocked looks at one entry): no device allocation may start inside it.
  if (const auto next = device_.lower_bound(p);
      mapDevice >= 0 && next != device_.end() && next->first - p < size) {
    lock.unlock();
    return fail(npuErrorInvalidValue, function,
                "[" + describe(ptr) + ", +" + std::to_string(size) +
                    ") overlaps device memory at " + describe(next->second->base));
  }
  if (mapDevice >= 0) {
    device_.emplace(p, std::make_shared<Allocation>(Allocation::HostMapped{}, ptr, size, mapDevice));
  }
  host_.emplace(p, HostRange{size, false});
  return npuSuccess;
}

npuError_t MemoryManager::hostDevicePointer(void* ptr, void** out, const char* function) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const std::shared_ptr<Allocation> a = findLocked(ptr);
  if (a == nullptr || !a->hostMapped) {
    lock.unlock();
    return fail(npuErrorInvalidValue, function,
                describe(ptr) + " is not inside host memory registered with npuHostRegisterMapped");
  }
  *out = ptr;  // one address space: the device address is the host address
  return npuSuccess;
}

npuError_t MemoryManager::hostUnregister(void* ptr, const char* function) {
  {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    const auto it = host_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != host_.end() && !it->second.owned) {
      // A mapped registration is also in the device map (Note [Mapped host memory]).
      if (const auto d = device_.find(it->first); d != device_.end() && d->second->hostMapped) {
        device_.erase(d);
      }
      host_.erase(it);
      return npuSuccess;
    }
  }
  return fail(npuErrorHostMemoryNotRegistered, function,
              describe(ptr) + " is not the start of a range registered with npuHostRegister");
}

void MemoryManager::attributes(const void* ptr, npuPointerAttributes& out) const {
  out.type = npuMemoryTypeUnregistered;
  out.device = -1;
  out.basePointer = nullptr;
  out.size = 0;
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (const std::shared_ptr<Allocation> a = findLocked(ptr)) {
    // Mapped host memory is host memory of that device, as CUDA reports it.
    out.type = a->hostMapped ? npuMemoryTypeHost : npuMemoryTypeDevice;
    out.device = a->device;
    out.basePointer = a->base;
    out.size = a->size;
    return;
  }
  const auto it = findHostLocked(reinterpret_cast<uintptr_t>(ptr), 1);
  if (it != host_.end()) {
    out.type = npuMemoryTypeHost;
    out.basePointer = reinterpret_cast<void*>(it->first);
    out.size = it->second.size;
  }
}

}  // namespace npurt::internal
