// See RaceCheck.h.
#include "core/RaceCheck.h"

namespace c10_npu::racecheck::detail {

bool queryEnabled() noexcept {
  npuRaceCheckMode mode = npuRaceCheckOff;
  return npuRaceCheckGetMode(&mode) == npuSuccess && mode != npuRaceCheckOff;
}

}  // namespace c10_npu::racecheck::detail
