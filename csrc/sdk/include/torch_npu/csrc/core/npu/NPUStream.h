// torch_npu's <torch_npu/csrc/core/npu/NPUStream.h>, forwarding to this
// project's core/NPUStream.h (c10_npu::NPUStream, getStreamFromExternal,
// getCurrentNPUStream, setCurrentNPUStream, getDefaultNPUStream,
// getStreamFromPool, ...). Shipped in the package's include/ (csrc/sdk), so
// an extension written for torch_npu compiles unchanged.
#pragma once

#include "acl/acl_rt.h"
#include "core/NPUStream.h"

namespace c10_npu {

// torch_npu takes the stream as an aclrtStream (void*); an aclrtStream of
// this backend is the npurt stream itself. Thread-safe (as the overload it
// forwards to).
inline NPUStream getStreamFromExternal(aclrtStream stream, c10::DeviceIndex device_index) {
  return getStreamFromExternal(static_cast<npuStream_t>(stream), device_index);
}

// torch_npu's name for a NORMAL-priority pool stream. Thread-safe.
inline NPUStream getNPUStreamFromPool(c10::DeviceIndex device_index = -1) {
  return getStreamFromPool(/*isHighPriority=*/false, device_index);
}

}  // namespace c10_npu
