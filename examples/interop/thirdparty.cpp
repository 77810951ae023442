// A minimal "third-party library" on top of npurt (no PyTorch): it owns a
// stream and launches its own kernels on it. Its C API is what a vendor
// library would expose; examples/interop/interop.py calls it through ctypes
// and interleaves its kernels with PyTorch ops on the same stream.
//
// Every function returns an npuError_t (0 = success) and never throws.
// Device pointers are pointers returned by npuMalloc (or the data_ptr() of an
// npu tensor); kernels run asynchronously, in stream order. Each kernel
// declares the memory it reads and writes, so that npurt's race detector
// (NPU_SIM_RACECHECK=1, docs/DEBUGGING.md) checks it against PyTorch's ops.
// Thread-safe: each call may be made from any thread.
#include <cstdint>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

#define TP_API extern "C" __attribute__((visibility("default")))

// Creates the library's stream on the calling thread's current device.
// [out] stream.
TP_API int tp_create_stream(npuStream_t* stream) { return npuStreamCreate(stream); }

// Destroys a stream made by tp_create_stream (work already queued still runs).
TP_API int tp_destroy_stream(npuStream_t stream) { return npuStreamDestroy(stream); }

// data[i] *= alpha for i in [0, n), on `stream`.
TP_API int tp_scale(npuStream_t stream, float* data, int64_t n, float alpha) {
  if (data == nullptr || n < 0) return npuErrorInvalidValue;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  return npurt::launch(stream, "thirdparty::scale", {{data, bytes, npuMemAccessReadWrite}}, [=] {
    for (int64_t i = 0; i < n; ++i) data[i] *= alpha;
  });
}

// dst[i] += src[i] for i in [0, n), on `stream`.
TP_API int tp_add(npuStream_t stream, float* dst, const float* src, int64_t n) {
  if (dst == nullptr || src == nullptr || n < 0) return npuErrorInvalidValue;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  return npurt::launch(stream, "thirdparty::add",
                       {{dst, bytes, npuMemAccessReadWrite}, {src, bytes, npuMemAccessRead}}, [=] {
                         for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
                       });
}

// Blocks until the library's stream is idle.
TP_API int tp_synchronize(npuStream_t stream) { return npuStreamSynchronize(stream); }
