#include "core/NpuVariables.h"

#include <array>
#include <utility>

#include "core/NPUException.h"
#include "npurt/npurt.h"

namespace c10_npu {

SocVersion socVersionFromName(const std::string& name) noexcept {
  static constexpr std::array<std::pair<const char*, SocVersion>, 28> kChips{{
      {"Ascend910PremiumA", SocVersion::Ascend910PremiumA},
      {"Ascend910ProA", SocVersion::Ascend910ProA},
      {"Ascend910A", SocVersion::Ascend910A},
      {"Ascend910ProB", SocVersion::Ascend910ProB},
      {"Ascend910B", SocVersion::Ascend910B},
      {"Ascend310P1", SocVersion::Ascend310P1},
      {"Ascend310P2", SocVersion::Ascend310P2},
      {"Ascend310P3", SocVersion::Ascend310P3},
      {"Ascend310P4", SocVersion::Ascend310P4},
      {"Ascend310P5", SocVersion::Ascend310P5},
      {"Ascend310P7", SocVersion::Ascend310P7},
      {"Ascend910B1", SocVersion::Ascend910B1},
      {"Ascend910B2", SocVersion::Ascend910B2},
      {"Ascend910B2C", SocVersion::Ascend910B2C},
      {"Ascend910B3", SocVersion::Ascend910B3},
      {"Ascend910B4", SocVersion::Ascend910B4},
      {"Ascend910B4-1", SocVersion::Ascend910B4_1},
      {"Ascend310B1", SocVersion::Ascend310B1},
      {"Ascend310B2", SocVersion::Ascend310B2},
      {"Ascend310B3", SocVersion::Ascend310B3},
      {"Ascend310B4", SocVersion::Ascend310B4},
      {"Ascend910_9391", SocVersion::Ascend910_9391},
      {"Ascend910_9392", SocVersion::Ascend910_9392},
      {"Ascend910_9381", SocVersion::Ascend910_9381},
      {"Ascend910_9382", SocVersion::Ascend910_9382},
      {"Ascend910_9372", SocVersion::Ascend910_9372},
      {"Ascend910_9362", SocVersion::Ascend910_9362},
      {"Ascend910_9363", SocVersion::Ascend910_9363},
  }};
  for (const auto& [chip, version] : kChips) {
    if (name == chip) return version;
  }
  if (name.rfind("Ascend950", 0) == 0) return SocVersion::Ascend950;
  return SocVersion::UnsupportedSocVersion;
}

std::string GetSocName() {
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, 0));
  return prop.socName;
}

const SocVersion& GetSocVersion() {
  // The configuration never changes once read, so neither does the answer.
  static const SocVersion version = socVersionFromName(GetSocName());
  return version;
}

}  // namespace c10_npu
