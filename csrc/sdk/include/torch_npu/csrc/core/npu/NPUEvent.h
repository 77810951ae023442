// torch_npu's <torch_npu/csrc/core/npu/NPUEvent.h>, forwarding to this
// project's core/NPUEvent.h (c10_npu::NPUEvent).
// Shipped in the package's include/ (csrc/sdk).
#pragma once

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "core/NPUEvent.h"
