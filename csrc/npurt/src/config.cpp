// Environment parsing for Config.
#include "config.h"

#include "npurt/npurt_soc_names.h"

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace npurt::internal {
namespace {

// Parses a variable that must be a plain decimal integer in [lo, hi] (no sign,
// no spaces: the README promises "a decimal integer", and accepting "+3" or
// " 3" would only hide typos). Leaves `out` untouched if the variable is unset.
// Returns "" or the error message.
std::string parseInteger(const char* name, uint64_t lo, uint64_t hi, uint64_t& out) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return {};
  const std::string_view text(raw);
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  const bool digitsOnly = !text.empty() && text.front() >= '0' && text.front() <= '9';
  if (!digitsOnly || ec != std::errc() || ptr != end || value < lo || value > hi) {
    return std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "], got '" + std::string(text) + "'";
  }
  out = value;
  return {};
}

// NPU_SIM_FAULT=<kind>:<n> (Note [Fault injection]). Leaves the fault unset
// if the variable is.
std::string parseFault(Config& config) {
  const char* raw = std::getenv("NPU_SIM_FAULT");
  if (raw == nullptr) return {};
  static constexpr const char* kKinds[] = {"launch", "task", "copy", "alloc"};  // npuFaultKind
  constexpr uint64_t kMaxNth = 1'000'000'000'000;
  const std::string_view text(raw);
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view kind = text.substr(0, colon);
    const std::string_view count = text.substr(colon + 1);
    uint64_t nth = 0;
    const char* end = count.data() + count.size();
    const auto [ptr, ec] = std::from_chars(count.data(), end, nth, 10);
    const bool digitsOnly = !count.empty() && count.front() >= '0' && count.front() <= '9';
    for (int k = 0; k < 4; ++k) {
      if (kind != kKinds[k]) continue;
      if (!digitsOnly || ec != std::errc() || ptr != end || nth < 1 || nth > kMaxNth) break;
      config.faultKind = k;
      config.faultNth = nth;
      return {};
    }
  }
  return "NPU_SIM_FAULT must be <kind>:<n> with kind launch, task, copy or alloc and n an "
         "integer in [1, " +
         std::to_string(kMaxNth) + "], got '" + std::string(text) + "'";
}

// Note [Visible devices]
// ASCEND_RT_VISIBLE_DEVICES plays CUDA_VISIBLE_DEVICES's role: a comma-separated
// list of distinct simulated device ordinals (spaces around entries allowed),
// in the order the process numbers them, so "1,0" swaps the two devices and
// "1" shows only device 1 as device 0. Unset or blank means every device.
// Anything else (an ordinal out of range, a duplicate, an empty entry, a
// non-number) fails initialisation with a message naming the value: CANN's
// runtime also refuses such a value, and a silent fallback would run a job on
// devices it was not given.
std::string parseVisibleDevices(int physicalCount, std::vector<int>& out) {
  out.clear();
  const char* raw = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
  std::string_view text = raw == nullptr ? std::string_view{} : std::string_view(raw);
  const auto blank = [](std::string_view t) {
    return t.find_first_not_of(" \t") == std::string_view::npos;
  };
  if (blank(text)) {
    for (int i = 0; i < physicalCount; ++i) out.push_back(i);
    return {};
  }
  const std::string error =
      "ASCEND_RT_VISIBLE_DEVICES must be a comma-separated list of distinct "
      "device ordinals in [0, " +
      std::to_string(physicalCount) + "), got '" + std::string(text) + "'";
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string_view::npos) return error;
    item = item.substr(first, item.find_last_not_of(' ') - first + 1);
    int value = -1;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value, 10);
    if (item.front() < '0' || item.front() > '9' || ec != std::errc() ||
        ptr != item.data() + item.size() || value >= physicalCount) {
      return error;
    }
    for (int seen : out) {
      if (seen == value) return error;
    }
    out.push_back(value);
    if (comma == std::string_view::npos) return {};
    start = comma + 1;
  }
}

// NPU_SIM_RACECHECK=0|off|1|error|log|abort (npuRaceCheckMode).
std::string parseRaceCheck(Config& config) {
  const char* raw = std::getenv("NPU_SIM_RACECHECK");
  if (raw == nullptr) return {};
  const std::string_view text(raw);
  static constexpr struct {
    const char* name;
    int mode;
  } kModes[] = {{"", 0}, {"0", 0}, {"off", 0}, {"1", 1}, {"error", 1}, {"log", 2}, {"abort", 3}};
  for (const auto& m : kModes) {
    if (text == m.name) {
      config.raceCheckMode = m.mode;
      return {};
    }
  }
  return "NPU_SIM_RACECHECK must be 0 (or off), 1 (or error), log or abort, got '" +
         std::string(text) + "'";
}

// Note [Simulated chip model]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// By default the simulated devices name no chip: their name is
// "NPU-SIM-<n>" and aclrtGetSocName has none, so code that asks which Ascend
// chip it runs on (torch_npu's get_soc_version, SupportedDevices in its test
// suite) learns that it runs on none. NPU_SIM_SOC_VERSION=<name> makes every
// device report that chip model instead, with the name CANN's runtime gives
// it, so that code and tests written for one chip run here unchanged. Only
// the name changes: the simulator models no difference between chips (their
// core counts, memory sizes, inf/nan modes), and docs say so. The accepted
// names are the chip models torch_npu knows (NpuVariables); any other value
// fails initialisation naming it, since torch_npu itself refuses an unknown
// chip ("Unsupported soc version").
std::string parseSocVersion(Config& config) {
  const char* raw = std::getenv("NPU_SIM_SOC_VERSION");
  if (raw == nullptr || *raw == '\0') return {};
#define NPURT_SOC_NAME(name, id) name,
  static constexpr const char* kChips[] = {NPURT_FOR_EACH_ASCEND_SOC(NPURT_SOC_NAME)};
#undef NPURT_SOC_NAME
  const std::string_view text(raw);
  constexpr std::string_view kAscend950 = NPURT_ASCEND950_PREFIX;  // every Ascend950 variant
  bool known = text.size() < 32 && text.substr(0, kAscend950.size()) == kAscend950;
  for (const char* chip : kChips) known = known || text == chip;
  if (!known) {
    return "NPU_SIM_SOC_VERSION must name an Ascend chip model known to torch_npu (e.g. "
           "Ascend910B1, Ascend910_9391, Ascend310P3, Ascend950PR), got '" +
           std::string(text) + "'";
  }
  config.socName = std::string(text);
  return {};
}

}  // namespace

std::string loadConfig(Config& config) {
  uint64_t devices = static_cast<uint64_t>(config.deviceCount);
  uint64_t cores = static_cast<uint64_t>(config.cores);
  uint64_t memoryMb = config.memoryMb;
  uint64_t delayUs = config.taskDelayUs;
  std::string error;
  if (error = parseInteger("NPU_SIM_DEVICE_COUNT", 1, 32, devices); !error.empty()) return error;
  if (error = parseInteger("NPU_SIM_CORES", 1, 256, cores); !error.empty()) return error;
  if (error = parseInteger("NPU_SIM_MEMORY_MB", 1, 16777216, memoryMb); !error.empty()) {
    return error;
  }
  if (error = parseInteger("NPU_SIM_TASK_DELAY_US", 0, 10000000, delayUs); !error.empty()) {
    return error;
  }
  if (error = parseInteger("NPU_SIM_EXIT_TIMEOUT_MS", 0, 3600000, config.exitTimeoutMs);
      !error.empty()) {
    return error;
  }
  if (error = parseFault(config); !error.empty()) return error;
  if (error = parseRaceCheck(config); !error.empty()) return error;
  if (error = parseSocVersion(config); !error.empty()) return error;
  if (error = parseVisibleDevices(static_cast<int>(devices), config.physicalDevice);
      !error.empty()) {
    return error;
  }
  config.deviceCount = static_cast<int>(config.physicalDevice.size());
  config.cores = static_cast<int>(cores);
  config.memoryMb = memoryMb;
  config.taskDelayUs = static_cast<uint32_t>(delayUs);
  if (const char* trace = std::getenv("NPU_SIM_TRACE"); trace != nullptr) config.tracePath = trace;
  return {};
}

}  // namespace npurt::internal
