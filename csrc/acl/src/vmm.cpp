// ACL virtual memory over npurt's (npurt_vmm.h): ACL's argument checks and
// names; the reservations' sizes, which aclrtReleaseMemAddress is not given.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "acl/acl_rt.h"
#include "acl_common.h"
#include "npurt/npurt_vmm.h"

using acl::check;
using acl::fail;
using acl::guarded;

namespace {

// The sizes of the reservations made here, by address (npuMemAddressFree
// wants the size, aclrtReleaseMemAddress has only the address).
struct Reservations {
  std::mutex mutex;
  std::map<void*, size_t> sizes;
};
Reservations& reservations() {
  static auto* const r = new Reservations();  // leaked: used by frees at exit
  return *r;
}

// Checks prop as CANN does and gives npurt's properties.
aclError toNpuProp(const char* fn, const aclrtPhysicalMemProp* prop, npuMemAllocationProp* out) {
  if (prop == nullptr) return fail(ACL_ERROR_INVALID_PARAM, std::string(fn) + ": prop is NULL");
  if (acl::rawEnum(prop->handleType) != ACL_MEM_HANDLE_TYPE_NONE ||
      acl::rawEnum(prop->allocationType) != ACL_MEM_ALLOCATION_TYPE_PINNED ||
      acl::rawEnum(prop->location.type) != ACL_MEM_LOCATION_TYPE_DEVICE) {
    return fail(ACL_ERROR_INVALID_PARAM,
                std::string(fn) +
                    ": prop must have handleType ACL_MEM_HANDLE_TYPE_NONE, allocationType "
                    "ACL_MEM_ALLOCATION_TYPE_PINNED and location.type "
                    "ACL_MEM_LOCATION_TYPE_DEVICE, got " +
                    std::to_string(acl::rawEnum(prop->handleType)) + ", " +
                    std::to_string(acl::rawEnum(prop->allocationType)) + ", " +
                    std::to_string(acl::rawEnum(prop->location.type)));
  }
  const int attr = acl::rawEnum(prop->memAttr);
  if (attr < ACL_DDR_MEM || attr > ACL_HBM_MEM_P2P_HUGE1G) {
    return fail(ACL_ERROR_INVALID_PARAM,
                std::string(fn) + ": unknown aclrtMemAttr " + std::to_string(attr));
  }
  if (prop->location.id > static_cast<uint32_t>(INT32_MAX)) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                std::string(fn) + ": device " + std::to_string(prop->location.id));
  }
  out->type = npuMemAllocationTypePinned;
  out->location.type = npuMemLocationTypeDevice;
  out->location.id = static_cast<int>(prop->location.id);
  return ACL_SUCCESS;
}

aclError badFlags(const char* fn, uint64_t flags) {
  return fail(ACL_ERROR_INVALID_PARAM,
              std::string(fn) + ": unsupported flags " + std::to_string(flags));
}

npuMemGenericAllocationHandle_t toNpu(aclrtDrvMemHandle handle) {
  return static_cast<npuMemGenericAllocationHandle_t>(handle);
}

}  // namespace

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                              aclrtMemGranularityOptions option,
                                                              size_t* granularity) {
  constexpr const char* kFn = "aclrtMemGetAllocationGranularity";
  return guarded(kFn, [&]() -> aclError {
    npuMemAllocationProp npuProp{};
    if (const aclError e = toNpuProp(kFn, prop, &npuProp); e != ACL_SUCCESS) return e;
    const int raw = acl::rawEnum(option);
    if (raw != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM &&
        raw != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  std::string(kFn) + ": unknown aclrtMemGranularityOptions " + std::to_string(raw));
    }
    return check(npuMemGetAllocationGranularity(granularity, &npuProp,
                                                npuMemAllocationGranularityMinimum),
                 kFn);
  });
}

ACL_FUNC_VISIBILITY aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                                    void* expectPtr, uint64_t flags) {
  constexpr const char* kFn = "aclrtReserveMemAddress";
  return guarded(kFn, [&]() -> aclError {
    if (virPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, std::string(kFn) + ": virPtr is NULL");
    if (flags > 1) return badFlags(kFn, flags);
    const aclError status = check(npuMemAddressReserve(virPtr, size, alignment, expectPtr, 0), kFn);
    if (status != ACL_SUCCESS) return status;
    Reservations& r = reservations();
    try {
      std::lock_guard<std::mutex> lock(r.mutex);
      r.sizes[*virPtr] = size;
    } catch (...) {
      (void)npuMemAddressFree(*virPtr, size);
      throw;
    }
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtReleaseMemAddress(void* virPtr) {
  constexpr const char* kFn = "aclrtReleaseMemAddress";
  return guarded(kFn, [&]() -> aclError {
    Reservations& r = reservations();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.sizes.find(virPtr);
    if (virPtr == nullptr || it == r.sizes.end()) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  std::string(kFn) + ": not the start of a reservation of aclrtReserveMemAddress");
    }
    const aclError status = check(npuMemAddressFree(virPtr, it->second), kFn);
    if (status == ACL_SUCCESS) r.sizes.erase(it);
    return status;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                                                 const aclrtPhysicalMemProp* prop, uint64_t flags) {
  constexpr const char* kFn = "aclrtMallocPhysical";
  return guarded(kFn, [&]() -> aclError {
    if (handle == nullptr) return fail(ACL_ERROR_INVALID_PARAM, std::string(kFn) + ": handle is NULL");
    npuMemAllocationProp npuProp{};
    if (const aclError e = toNpuProp(kFn, prop, &npuProp); e != ACL_SUCCESS) return e;
    if (flags != 0) return badFlags(kFn, flags);
    npuMemGenericAllocationHandle_t h = nullptr;
    const aclError status = check(npuMemCreate(&h, size, &npuProp, 0), kFn);
    if (status == ACL_SUCCESS) *handle = h;
    return status;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  constexpr const char* kFn = "aclrtFreePhysical";
  return guarded(kFn, [&]() -> aclError { return check(npuMemRelease(toNpu(handle)), kFn); });
}

ACL_FUNC_VISIBILITY aclError aclrtMapMem(void* virPtr, size_t size, size_t offset,
                                         aclrtDrvMemHandle handle, uint64_t flags) {
  constexpr const char* kFn = "aclrtMapMem";
  return guarded(kFn, [&]() -> aclError {
    if (flags != 0) return badFlags(kFn, flags);
    return check(npuMemMap(virPtr, size, offset, toNpu(handle), 0), kFn);
  });
}

ACL_FUNC_VISIBILITY aclError aclrtUnmapMem(void* virPtr) {
  constexpr const char* kFn = "aclrtUnmapMem";
  return guarded(kFn, [&]() -> aclError {
    void* base = nullptr;
    size_t size = 0;
    if (npuMemGetAddressRange(&base, &size, virPtr) != npuSuccess || base != virPtr) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  std::string(kFn) + ": virPtr is not the start of a mapping (aclrtMapMem)");
    }
    return check(npuMemUnmap(virPtr, size), kFn);
  });
}

}  // extern "C"
