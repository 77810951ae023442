// Entry points: device memory, copies, memsets, pinned host memory.
// See Note [Memory lifetime] in csrc/npurt/README.md.
#include <cstring>
#include <string>

#include "api_common.h"
#include "graph/capture.h"

using namespace npurt::internal;

namespace {

npuError_t badKind(const char* fn, int rawKind) {
  return fail(npuErrorInvalidMemcpyDirection, fn, "unknown memcpy kind " + std::to_string(rawKind));
}

}  // namespace

extern "C" {

npuError_t npuMalloc(void** devPtr, size_t size) {
  constexpr const char* kFn = "npuMalloc";
  return guarded(kFn, [&](Runtime& rt) {
    if (devPtr == nullptr) return nullArgument(kFn, "devPtr");
    if (size == 0) {
      *devPtr = nullptr;
      return npuSuccess;
    }
    if (faults().fires(FaultKind::kAlloc)) [[unlikely]] {
      return fail(npuErrorMemoryAllocation, kFn, kInjectedFault);
    }
    const int index = Runtime::currentDevice();
    Device& device = rt.device(index);
    const npuError_t status =
        rt.memory.allocate(index, size, device.capacity(), device.usedCounter(), devPtr, kFn);
    // New memory has no history (Note [Happens-before model]): a free and a
    // new npuMalloc at the same address are ordered by the host.
    if (status == npuSuccess && racecheck::enabled()) [[unlikely]]
      racecheck::resetRange(*devPtr, size);
    return status;
  });
}

npuError_t npuFree(void* devPtr) {
  constexpr const char* kFn = "npuFree";
  return guardedRelease(kFn, [&](Runtime& rt) {
    if (devPtr == nullptr) return npuSuccess;
    return rt.memory.free(devPtr, kFn);
  });
}

npuError_t npuMemcpy(void* dst, const void* src, size_t count, npuMemcpyKind kind) {
  constexpr const char* kFn = "npuMemcpy";
  return guarded(kFn, [&](Runtime& rt) {
    const int rawKind = rawEnumValue(kind);  // any int may arrive from C
    if (rawKind < npuMemcpyHostToHost || rawKind > npuMemcpyDefault) return badKind(kFn, rawKind);
    if (count == 0) return npuSuccess;
    CheckedRange range;
    if (const npuError_t s =
            rt.memory.checkCopy(dst, src, count, static_cast<npuMemcpyKind>(rawKind), range, kFn);
        s != npuSuccess) {
      return s;
    }
    // Note [Stream capture]: potentially unsafe while a capture forbids it.
    if (const npuError_t s = checkUnsafeCall(kFn); s != npuSuccess) return s;
    if (faults().fires(FaultKind::kCopy)) [[unlikely]]
      return injectedFault(kFn);
    copyBytes(dst, src, count);  // `range` keeps the allocations alive meanwhile
    return npuSuccess;
  });
}

npuError_t npuMemcpyAsync(void* dst, const void* src, size_t count, npuMemcpyKind kind,
                          npuStream_t handle) {
  constexpr const char* kFn = "npuMemcpyAsync";
  return guarded(kFn, [&](Runtime& rt) {
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    const int rawKind = rawEnumValue(kind);  // any int may arrive from C
    if (rawKind < npuMemcpyHostToHost || rawKind > npuMemcpyDefault) return badKind(kFn, rawKind);
    if (count == 0) return npuSuccess;
    CheckedRange range;
    if (const npuError_t s =
            rt.memory.checkCopy(dst, src, count, static_cast<npuMemcpyKind>(rawKind), range, kFn);
        s != npuSuccess) {
      return s;
    }
    if (stream->capturing()) [[unlikely]] {
      const CaptureOutcome outcome = captureWork(*stream, kFn, [&] {
        return makeMemcpyWork(dst, src, count, std::move(range.dst), std::move(range.src));
      });
      if (outcome.handled) return outcome.status;
    }
    // An injected fault fails when the copy runs (Note [Fault injection]).
    const bool injected = faults().fires(FaultKind::kCopy);
    submit(rt, *stream,
           makeTask<MemcpyTask>(dst, src, count, std::move(range.dst), std::move(range.src),
                                injected));
    return npuSuccess;
  });
}

npuError_t npuMemset(void* devPtr, int value, size_t count) {
  constexpr const char* kFn = "npuMemset";
  return guarded(kFn, [&](Runtime& rt) {
    if (count == 0) return npuSuccess;
    CheckedRange range;
    if (const npuError_t s = rt.memory.checkMemset(devPtr, count, range, kFn); s != npuSuccess) {
      return s;
    }
    if (const npuError_t s = checkUnsafeCall(kFn); s != npuSuccess) return s;  // as npuMemcpy
    if (faults().fires(FaultKind::kCopy)) [[unlikely]]
      return injectedFault(kFn);
    std::memset(devPtr, value, count);
    return npuSuccess;
  });
}

npuError_t npuMemsetAsync(void* devPtr, int value, size_t count, npuStream_t handle) {
  constexpr const char* kFn = "npuMemsetAsync";
  return guarded(kFn, [&](Runtime& rt) {
    Stream* stream = findStreamCached(rt, handle);
    if (stream == nullptr) return invalidStream(kFn, handle);
    if (count == 0) return npuSuccess;
    CheckedRange range;
    if (const npuError_t s = rt.memory.checkMemset(devPtr, count, range, kFn); s != npuSuccess) {
      return s;
    }
    if (stream->capturing()) [[unlikely]] {
      const CaptureOutcome outcome = captureWork(
          *stream, kFn, [&] { return makeMemsetWork(devPtr, value, count, std::move(range.dst)); });
      if (outcome.handled) return outcome.status;
    }
    const bool injected = faults().fires(FaultKind::kCopy);  // as npuMemcpyAsync
    submit(rt, *stream, makeTask<MemsetTask>(devPtr, value, count, std::move(range.dst), injected));
    return npuSuccess;
  });
}

npuError_t npuMallocHost(void** ptr, size_t size) {
  constexpr const char* kFn = "npuMallocHost";
  return guarded(kFn, [&](Runtime& rt) {
    if (ptr == nullptr) return nullArgument(kFn, "ptr");
    if (size == 0) {
      *ptr = nullptr;
      return npuSuccess;
    }
    return rt.memory.mallocHost(size, ptr, kFn);
  });
}

npuError_t npuFreeHost(void* ptr) {
  constexpr const char* kFn = "npuFreeHost";
  return guardedRelease(kFn, [&](Runtime& rt) {
    if (ptr == nullptr) return npuSuccess;
    return rt.memory.freeHost(ptr, kFn);
  });
}

npuError_t npuHostRegister(void* ptr, size_t size, unsigned int flags) {
  constexpr const char* kFn = "npuHostRegister";
  return guarded(kFn, [&](Runtime& rt) {
    if (ptr == nullptr) return nullArgument(kFn, "ptr");
    if (size == 0) return fail(npuErrorInvalidValue, kFn, "size is 0");
    if (flags != npuHostRegisterDefault && flags != npuHostRegisterMapped) {
      return fail(npuErrorInvalidValue, kFn,
                  "flags must be npuHostRegisterDefault (0) or npuHostRegisterMapped (2), got " +
                      std::to_string(flags));
    }
    const int mapDevice = flags == npuHostRegisterMapped ? Runtime::currentDevice() : -1;
    return rt.memory.hostRegister(ptr, size, mapDevice, kFn);
  });
}

npuError_t npuHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  constexpr const char* kFn = "npuHostGetDevicePointer";
  return guarded(kFn, [&](Runtime& rt) {
    if (pDevice == nullptr) return nullArgument(kFn, "pDevice");
    if (flags != 0u) {
      return fail(npuErrorInvalidValue, kFn, "flags must be 0, got " + std::to_string(flags));
    }
    return rt.memory.hostDevicePointer(pHost, pDevice, kFn);
  });
}

npuError_t npuHostUnregister(void* ptr) {
  constexpr const char* kFn = "npuHostUnregister";
  return guardedRelease(kFn, [&](Runtime& rt) { return rt.memory.hostUnregister(ptr, kFn); });
}

npuError_t npuPointerGetAttributes(npuPointerAttributes* attributes, const void* ptr) {
  constexpr const char* kFn = "npuPointerGetAttributes";
  return guarded(kFn, [&](Runtime& rt) {
    if (attributes == nullptr) return nullArgument(kFn, "attributes");
    rt.memory.attributes(ptr, *attributes);
    return npuSuccess;
  });
}

}  // extern "C"
