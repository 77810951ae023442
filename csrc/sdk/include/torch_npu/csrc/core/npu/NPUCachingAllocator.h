// torch_npu's <torch_npu/csrc/core/npu/NPUCachingAllocator.h>, forwarding to this
// project's core/NPUCachingAllocator.h (c10_npu::NPUCachingAllocator).
// Shipped in the package's include/ (csrc/sdk).
#pragma once

#include "torch_npu/csrc/core/npu/NPUGraphsUtils.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "core/NPUBaseAllocation.h"
#include "core/NPUCachingAllocator.h"
