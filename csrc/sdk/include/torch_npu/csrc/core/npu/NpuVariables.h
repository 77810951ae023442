// torch_npu's <torch_npu/csrc/core/npu/NpuVariables.h>, forwarding to this
// project's core/NpuVariables.h (SocVersion, GetSocVersion).
// Shipped in the package's include/ (csrc/sdk).
#pragma once

#include "core/NpuVariables.h"
