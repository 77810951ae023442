// ACL memory over npurt memory: device memory, pinned host memory, copies
// and memsets. ACL's destMax / maxCount bounds are checked here.
#include <string>

#include "acl/acl_rt.h"
#include "acl_common.h"

using acl::check;
using acl::fail;
using acl::guarded;
using acl::resolveStream;

namespace {

bool toNpuKind(const aclrtMemcpyKind& kind, npuMemcpyKind* out) {
  switch (acl::rawEnum(kind)) {
    case ACL_MEMCPY_HOST_TO_HOST: *out = npuMemcpyHostToHost; return true;
    case ACL_MEMCPY_HOST_TO_DEVICE: *out = npuMemcpyHostToDevice; return true;
    case ACL_MEMCPY_DEVICE_TO_HOST: *out = npuMemcpyDeviceToHost; return true;
    case ACL_MEMCPY_DEVICE_TO_DEVICE: *out = npuMemcpyDeviceToDevice; return true;
    case ACL_MEMCPY_DEFAULT: *out = npuMemcpyDefault; return true;
  }
  return false;
}

// Checks what ACL checks before a copy: pointers, count <= destMax, kind.
aclError checkCopy(const char* function, void* dst, size_t destMax, const void* src, size_t count,
                   const aclrtMemcpyKind& kind, npuMemcpyKind* npuKind) {
  if (dst == nullptr || src == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(function) + ": dst or src is NULL");
  }
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(function) + ": count " +
                                             std::to_string(count) + " exceeds destMax " +
                                             std::to_string(destMax));
  }
  if (!toNpuKind(kind, npuKind)) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(function) + ": unknown aclrtMemcpyKind " +
                                             std::to_string(acl::rawEnum(kind)));
  }
  return ACL_SUCCESS;
}

aclError checkSet(const char* function, void* devPtr, size_t maxCount, size_t count) {
  if (devPtr == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(function) + ": devPtr is NULL");
  }
  if (count > maxCount) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(function) + ": count " +
                                             std::to_string(count) + " exceeds maxCount " +
                                             std::to_string(maxCount));
  }
  return ACL_SUCCESS;
}

aclError mallocWithPolicy(const char* name, void** devPtr, size_t size,
                          aclrtMemMallocPolicy policy) {
  return guarded(name, [&]() -> aclError {
    if (devPtr == nullptr || size == 0) {
      return fail(ACL_ERROR_INVALID_PARAM, std::string(name) + ": devPtr is NULL or size is 0");
    }
    const int rawPolicy = acl::rawEnum(policy);
    if (rawPolicy < ACL_MEM_MALLOC_HUGE_FIRST || rawPolicy > ACL_MEM_MALLOC_NORMAL_ONLY_P2P) {
      return fail(ACL_ERROR_INVALID_PARAM, std::string(name) + ": unknown aclrtMemMallocPolicy " +
                                               std::to_string(rawPolicy));
    }
    return check(npuMalloc(devPtr, size), name);
  });
}

}  // namespace

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return mallocWithPolicy("aclrtMalloc", devPtr, size, policy);
}

ACL_FUNC_VISIBILITY aclError aclrtMallocAlign32(void** devPtr, size_t size,
                                                aclrtMemMallocPolicy policy) {
  // npuMalloc's blocks are aligned far beyond 32 bytes and never padded.
  return mallocWithPolicy("aclrtMallocAlign32", devPtr, size, policy);
}

ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr) {
  return guarded("aclrtFree", [&]() -> aclError {
    if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
    return check(npuFree(devPtr), "aclrtFree");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return guarded("aclrtMallocHost", [&]() -> aclError {
    if (hostPtr == nullptr || size == 0) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL or size is 0");
    }
    return check(npuMallocHost(hostPtr, size), "aclrtMallocHost");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr) {
  return guarded("aclrtFreeHost", [&]() -> aclError {
    if (hostPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
    return check(npuFreeHost(hostPtr), "aclrtFreeHost");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type,
                                               void** devPtr) {
  return guarded("aclrtHostRegister", [&]() -> aclError {
    if (ptr == nullptr || devPtr == nullptr || size == 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtHostRegister: ptr or devPtr is NULL, or size is 0");
    }
    if (type == ACL_HOST_REGISTER_IOMEMORY || type == ACL_HOST_REGISTER_READONLY) {
      return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                  "aclrtHostRegister: only ACL_HOST_REGISTER_MAPPED is simulated");
    }
    if (type != ACL_HOST_REGISTER_MAPPED) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtHostRegister: type must be ACL_HOST_REGISTER_MAPPED");
    }
    if (const aclError e =
            check(npuHostRegister(ptr, size, npuHostRegisterMapped), "aclrtHostRegister");
        e != ACL_SUCCESS) {
      return e;
    }
    return check(npuHostGetDevicePointer(devPtr, ptr, 0), "aclrtHostRegister");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtHostUnregister(void* ptr) {
  return guarded("aclrtHostUnregister", [&]() -> aclError {
    if (ptr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtHostUnregister: ptr is NULL");
    return check(npuHostUnregister(ptr), "aclrtHostUnregister");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind) {
  return guarded("aclrtMemcpy", [&]() -> aclError {
    npuMemcpyKind npuKind{};
    if (aclError e = checkCopy("aclrtMemcpy", dst, destMax, src, count, kind, &npuKind)) return e;
    return check(npuMemcpy(dst, src, count, npuKind), "aclrtMemcpy");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream) {
  return guarded("aclrtMemcpyAsync", [&]() -> aclError {
    npuMemcpyKind npuKind{};
    if (aclError e = checkCopy("aclrtMemcpyAsync", dst, destMax, src, count, kind, &npuKind)) {
      return e;
    }
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtMemcpyAsync")) return e;
    return check(npuMemcpyAsync(dst, src, count, npuKind, s), "aclrtMemcpyAsync");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  return guarded("aclrtMemset", [&]() -> aclError {
    if (aclError e = checkSet("aclrtMemset", devPtr, maxCount, count)) return e;
    return check(npuMemset(devPtr, value, count), "aclrtMemset");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream) {
  return guarded("aclrtMemsetAsync", [&]() -> aclError {
    if (aclError e = checkSet("aclrtMemsetAsync", devPtr, maxCount, count)) return e;
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtMemsetAsync")) return e;
    return check(npuMemsetAsync(devPtr, value, count, s), "aclrtMemsetAsync");
  });
}

ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  return guarded("aclrtGetMemInfo", [&]() -> aclError {
    if (free == nullptr || total == nullptr) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: free or total is NULL");
    }
    switch (acl::rawEnum(attr)) {
      case ACL_HBM_MEM:
      case ACL_HBM_MEM_HUGE:
      case ACL_HBM_MEM_NORMAL:
      case ACL_HBM_MEM_P2P_HUGE:
      case ACL_HBM_MEM_P2P_NORMAL:
        return check(npuMemGetInfo(free, total), "aclrtGetMemInfo");
      case ACL_DDR_MEM:
      case ACL_DDR_MEM_HUGE:
      case ACL_DDR_MEM_NORMAL:
      case ACL_DDR_MEM_P2P_HUGE:
      case ACL_DDR_MEM_P2P_NORMAL:
        *free = 0;  // the simulated device has no DDR
        *total = 0;
        return ACL_SUCCESS;
    }
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtGetMemInfo: unknown aclrtMemAttr " + std::to_string(acl::rawEnum(attr)));
  });
}

}  // extern "C"
