// Runtime configuration, read from the environment once, at the first npurt
// call. See the configuration table in csrc/npurt/README.md.
//
// Thread safety: loadConfig() reads the environment and is called exactly
// once, from Runtime's constructor (serialised by the function-local static
// that builds the runtime). Config is immutable afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npurt::internal {

struct Config {
  int deviceCount = 2;            // devices the process sees (after ASCEND_RT_VISIBLE_DEVICES)
  // physicalDevice[i]: the simulated device behind ordinal i; 0..n-1 unless
  // ASCEND_RT_VISIBLE_DEVICES restricts or reorders them. See Note [Visible devices].
  std::vector<int> physicalDevice;
  int cores = 2;                  // NPU_SIM_CORES, executor threads per device, [1, 256]
  uint64_t memoryMb = 8192;       // NPU_SIM_MEMORY_MB, capacity per device, [1, 16777216]
  uint32_t taskDelayUs = 0;       // NPU_SIM_TASK_DELAY_US, [0, 10000000]
  std::string tracePath;          // NPU_SIM_TRACE, empty = no trace at start/exit
  uint64_t exitTimeoutMs = 1000;  // NPU_SIM_EXIT_TIMEOUT_MS, [0, 3600000]
  // NPU_SIM_FAULT=<kind>:<n>: the fault armed at start (Note [Fault
  // injection]); faultKind is an npuFaultKind value, -1 for none.
  int faultKind = -1;
  uint64_t faultNth = 0;
  // NPU_SIM_RACECHECK: an npuRaceCheckMode value (0 off, 1 error, 2 log,
  // 3 abort); Note [Happens-before model] in racecheck/racecheck.h.
  int raceCheckMode = 0;
  // NPU_SIM_SOC_VERSION: the chip model the devices report (Note [Simulated
  // chip model]); empty for none, the default.
  std::string socName;
};

// Fills `config` from the environment. Returns "" on success, otherwise the
// message for npuErrorInitializationError, e.g.
// "NPU_SIM_CORES must be an integer in [1, 256], got 'abc'". The error is
// sticky: the runtime keeps returning it (see Runtime::admit).
std::string loadConfig(Config& config);

}  // namespace npurt::internal
