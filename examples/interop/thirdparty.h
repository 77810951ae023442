// A minimal "third-party NPU library": it owns streams and launches its own
// kernels on them, through the ACL runtime API only (no PyTorch, no npurt
// names), as a library written for Ascend does. Every function returns an
// aclError (ACL_SUCCESS = 0) and never throws; aclGetRecentErrMsg() says why
// a call failed. Kernels run asynchronously, in stream order. Device
// pointers are aclrtMalloc memory or the data_ptr() of an npu tensor.
// Thread-safe: each call may be made from any thread.
#pragma once

#include <cstdint>

#include "acl/acl.h"

extern "C" {
// [out] stream: a new stream on the calling thread's current device.
aclError tp_create_stream(aclrtStream* stream);
// Destroys a stream of tp_create_stream (queued kernels still run).
aclError tp_destroy_stream(aclrtStream stream);
// data[i] *= alpha for i in [0, n), on `stream`.
aclError tp_scale(aclrtStream stream, float* data, int64_t n, float alpha);
// dst[i] += src[i] for i in [0, n), on `stream`.
aclError tp_add(aclrtStream stream, float* dst, const float* src, int64_t n);
// Blocks until the kernels queued on `stream` have run.
aclError tp_synchronize(aclrtStream stream);
}
