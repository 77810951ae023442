// The chip model the device is: torch_npu's SocVersion and GetSocVersion
// (<torch_npu/csrc/core/npu/NpuVariables.h>), so that code which branches on
// the chip compiles and runs unchanged.
//
// The simulated devices are no chip unless NPU_SIM_SOC_VERSION names one
// (Note [Simulated chip model] in csrc/npurt/src/config.cpp); then
// GetSocVersion() is UnsupportedSocVersion, as torch_npu's is before it has
// read a chip name. The enumerators' values are torch_npu's: code compares
// them (`GetSocVersion() >= SocVersion::Ascend910B1`, Python's
// `get_soc_version() >= 260`).
//
// Layer: framework core.
#pragma once

#include <string>

namespace c10_npu {

enum class SocVersion {
  UnsupportedSocVersion = -1,
  Ascend910PremiumA = 100,
  Ascend910ProA,
  Ascend910A,
  Ascend910ProB,
  Ascend910B,
  Ascend310P1 = 200,
  Ascend310P2,
  Ascend310P3,
  Ascend310P4,
  Ascend310P5,
  Ascend310P7,
  Ascend910B1 = 220,
  Ascend910B2,
  Ascend910B2C,
  Ascend910B3,
  Ascend910B4,
  Ascend910B4_1,
  Ascend310B1 = 240,
  Ascend310B2,
  Ascend310B3,
  Ascend310B4,
  Ascend910_9391 = 250,
  Ascend910_9392,
  Ascend910_9381,
  Ascend910_9382,
  Ascend910_9372,
  Ascend910_9362,
  Ascend910_9363,
  Ascend950 = 260
};

// The SocVersion a chip name stands for ("Ascend910B4-1" → Ascend910B4_1,
// any "Ascend950…" → Ascend950); UnsupportedSocVersion for "" or a name that
// is no chip torch_npu knows. Thread-safe.
SocVersion socVersionFromName(const std::string& name) noexcept;

// The simulated chip's name ("" for none): npuDeviceProp::socName of device
// 0, the same for every device. Raises the runtime's initialisation error.
// Thread-safe.
std::string GetSocName();

// The simulated chip's SocVersion, read once. Raises the runtime's
// initialisation error. Thread-safe.
const SocVersion& GetSocVersion();

}  // namespace c10_npu
