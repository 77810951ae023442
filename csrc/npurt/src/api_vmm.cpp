// Entry points: virtual memory (npurt_vmm.h). See Note [Virtual memory] in
// csrc/npurt/README.md.
#include <string>

#include "api_common.h"
#include "npurt/npurt_vmm.h"

using namespace npurt::internal;

namespace {

// The device a prop names, after checking it; npuSuccess or the failure.
npuError_t checkProp(Runtime& rt, const npuMemAllocationProp* prop, const char* fn) {
  if (prop == nullptr) return nullArgument(fn, "prop");
  const int type = rawEnumValue(prop->type);
  if (type != npuMemAllocationTypePinned) {
    return fail(npuErrorInvalidValue, fn,
                "prop->type " + std::to_string(type) +
                    " is not npuMemAllocationTypePinned (the only type of the simulated device)");
  }
  const int location = rawEnumValue(prop->location.type);
  if (location != npuMemLocationTypeDevice) {
    return fail(npuErrorInvalidValue, fn,
                "prop->location.type " + std::to_string(location) +
                    " is not npuMemLocationTypeDevice");
  }
  if (!rt.validDevice(prop->location.id)) {
    return fail(npuErrorInvalidDevice, fn,
                "prop->location.id " + std::to_string(prop->location.id) + " is not a device (" +
                    std::to_string(rt.deviceCount()) + " devices)");
  }
  return npuSuccess;
}

npuError_t badFlags(const char* fn, unsigned long long flags) {
  return fail(npuErrorInvalidValue, fn, "flags must be 0, got " + std::to_string(flags));
}

}  // namespace

extern "C" {

npuError_t npuMemGetAllocationGranularity(size_t* granularity, const npuMemAllocationProp* prop,
                                          npuMemAllocationGranularityFlags option) {
  constexpr const char* kFn = "npuMemGetAllocationGranularity";
  return guarded(kFn, [&](Runtime& rt) {
    if (granularity == nullptr) return nullArgument(kFn, "granularity");
    if (const npuError_t s = checkProp(rt, prop, kFn); s != npuSuccess) return s;
    const int raw = rawEnumValue(option);
    if (raw != npuMemAllocationGranularityMinimum &&
        raw != npuMemAllocationGranularityRecommended) {
      return fail(npuErrorInvalidValue, kFn, "unknown option " + std::to_string(raw));
    }
    *granularity = kVmmGranularity;
    return npuSuccess;
  });
}

npuError_t npuMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr,
                                unsigned long long flags) {
  constexpr const char* kFn = "npuMemAddressReserve";
  return guarded(kFn, [&](Runtime& rt) {
    if (ptr == nullptr) return nullArgument(kFn, "ptr");
    if (flags != 0) return badFlags(kFn, flags);
    return rt.vm.reserve(ptr, size, alignment, addr, kFn);
  });
}

npuError_t npuMemAddressFree(void* ptr, size_t size) {
  constexpr const char* kFn = "npuMemAddressFree";
  return guardedRelease(kFn, [&](Runtime& rt) { return rt.vm.addressFree(ptr, size, kFn); });
}

npuError_t npuMemCreate(npuMemGenericAllocationHandle_t* handle, size_t size,
                        const npuMemAllocationProp* prop, unsigned long long flags) {
  constexpr const char* kFn = "npuMemCreate";
  return guarded(kFn, [&](Runtime& rt) {
    if (handle == nullptr) return nullArgument(kFn, "handle");
    if (const npuError_t s = checkProp(rt, prop, kFn); s != npuSuccess) return s;
    if (flags != 0) return badFlags(kFn, flags);
    // Note [Fault injection]: physical memory fails like npuMalloc.
    if (faults().fires(FaultKind::kAlloc)) [[unlikely]] {
      return fail(npuErrorMemoryAllocation, kFn, kInjectedFault);
    }
    Device& device = rt.device(prop->location.id);
    uint64_t id = 0;
    const npuError_t status = rt.vm.create(&id, size, prop->location.id, device.capacity(),
                                           device.usedCounter(), kFn);
    if (status == npuSuccess) {
      *handle = reinterpret_cast<npuMemGenericAllocationHandle_t>(static_cast<uintptr_t>(id));
    }
    return status;
  });
}

npuError_t npuMemRelease(npuMemGenericAllocationHandle_t handle) {
  constexpr const char* kFn = "npuMemRelease";
  return guardedRelease(kFn, [&](Runtime& rt) { return rt.vm.release(handleBits(handle), kFn); });
}

npuError_t npuMemMap(void* ptr, size_t size, size_t offset, npuMemGenericAllocationHandle_t handle,
                     unsigned long long flags) {
  constexpr const char* kFn = "npuMemMap";
  return guarded(kFn, [&](Runtime& rt) {
    if (flags != 0) return badFlags(kFn, flags);
    const npuError_t status = rt.vm.map(rt.memory, ptr, size, offset, handleBits(handle), kFn);
    // Mapped memory has no history (Note [Happens-before model]), as a new
    // npuMalloc: the host ordered the map after everything before it.
    if (status == npuSuccess && racecheck::enabled()) [[unlikely]]
      racecheck::resetRange(ptr, size);
    return status;
  });
}

npuError_t npuMemUnmap(void* ptr, size_t size) {
  constexpr const char* kFn = "npuMemUnmap";
  return guardedRelease(kFn, [&](Runtime& rt) { return rt.vm.unmap(rt.memory, ptr, size, kFn); });
}

npuError_t npuMemGetAddressRange(void** base, size_t* size, const void* ptr) {
  constexpr const char* kFn = "npuMemGetAddressRange";
  return guarded(kFn, [&](Runtime& rt) {
    if (rt.vm.mappingRange(ptr, base, size)) return npuSuccess;
    npuPointerAttributes attributes{};
    rt.memory.attributes(ptr, attributes);
    if (attributes.type != npuMemoryTypeDevice) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%p is not device memory", ptr);
      return fail(npuErrorInvalidDevicePointer, kFn, buf);
    }
    if (base != nullptr) *base = attributes.basePointer;
    if (size != nullptr) *size = attributes.size;
    return npuSuccess;
  });
}

}  // extern "C"
