#include "core/NpuVariables.h"

#include <utility>

#include "core/NPUException.h"
#include "npurt/npurt.h"
#include "npurt/npurt_soc_names.h"

namespace c10_npu {

SocVersion socVersionFromName(const std::string& name) noexcept {
#define NPU_SOC_ENTRY(name, id) std::pair<const char*, SocVersion>{name, SocVersion::id},
  static constexpr std::pair<const char*, SocVersion> kChips[] = {
      NPURT_FOR_EACH_ASCEND_SOC(NPU_SOC_ENTRY)};
#undef NPU_SOC_ENTRY
  for (const auto& [chip, version] : kChips) {
    if (name == chip) return version;
  }
  if (name.rfind(NPURT_ASCEND950_PREFIX, 0) == 0) return SocVersion::Ascend950;
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
