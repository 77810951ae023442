// torch_npu's <torch_npu/csrc/core/npu/NPUFunctions.h>, forwarding to this
// project's core/NPUFunctions.h (device_count, current_device, set_device, device_synchronize).
// Shipped in the package's include/ (csrc/sdk).
#pragma once

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "core/NPUFunctions.h"
