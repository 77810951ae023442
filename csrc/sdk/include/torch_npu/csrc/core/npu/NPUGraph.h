// torch_npu's <torch_npu/csrc/core/npu/NPUGraph.h>, forwarding to this
// project's core/graphs/NPUGraph.h (c10_npu::NPUGraph).
// Shipped in the package's include/ (csrc/sdk).
#pragma once

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "core/graphs/NPUGraph.h"
