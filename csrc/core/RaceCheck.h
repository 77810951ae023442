// c10_npu::racecheck — the framework's side of npurt's device race detector
// (Note [Happens-before model] in csrc/npurt/src/racecheck/racecheck.h; user
// guide: docs/DEBUGGING.md, "Device race detector").
//
// Layer: framework core. The op layer declares each kernel task's reads and
// writes (TaskAccess in csrc/aten/OpLauncher.h) and the caching allocator
// tells npurt when it hands a block out again, both only while the detector
// is on.
#pragma once

#include "npurt/npurt.h"

namespace c10_npu::racecheck {

namespace detail {
bool queryEnabled() noexcept;
}  // namespace detail

// True if npurt's race detector was on when this was first called
// (NPU_SIM_RACECHECK); cached, so a hot path pays one load and a predictable
// branch. A later npuRaceCheckSetMode is not seen here: PyTorch programs
// switch the detector with the environment variable. Thread-safe.
inline bool enabled() noexcept {
  static const bool on = detail::queryEnabled();
  return on;
}

}  // namespace c10_npu::racecheck
