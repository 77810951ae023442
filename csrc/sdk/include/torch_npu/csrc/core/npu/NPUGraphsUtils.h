// torch_npu's <torch_npu/csrc/core/npu/NPUGraphsUtils.h>: the capture and
// memory-pool id types (c10_npu::CaptureId_t, c10_npu::MempoolId_t), which
// the C++ hooks of a pluggable allocator take (Note [Pluggable allocator
// hooks] in core/NPUPluggableAllocator.h). They are c10's own types, as in
// torch_npu. Shipped in the package's include/ (csrc/sdk).
#pragma once

#include <c10/core/Allocator.h>

namespace c10_npu {

using CaptureId_t = c10::CaptureId_t;
using MempoolId_t = c10::MempoolId_t;

}  // namespace c10_npu
