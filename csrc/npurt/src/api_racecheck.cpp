// Entry points: the device race detector. See Note [Happens-before model] in
// racecheck/racecheck.h and include/npurt/npurt_racecheck.h.
#include <cstring>
#include <string>

#include "api_common.h"

using namespace npurt::internal;

extern "C" {

npuError_t npuTaskDeclareAccesses(const void* userData, const npuMemAccess* accesses,
                                  size_t count) {
  constexpr const char* kFn = "npuTaskDeclareAccesses";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    if (userData == nullptr) return nullArgument(kFn, "userData");
    if (accesses == nullptr && count > 0) return nullArgument(kFn, "accesses");
    for (size_t i = 0; i < count; ++i) {
      const unsigned mode = accesses[i].mode;
      if (mode == 0u || (mode & ~npuMemAccessReadWrite) != 0u) {
        return fail(npuErrorInvalidValue, kFn,
                    "accesses[" + std::to_string(i) + "].mode must be npuMemAccessRead, " +
                        "npuMemAccessWrite or both, got " + std::to_string(mode));
      }
    }
    if (!racecheck::enabled()) return npuSuccess;
    racecheck::declare(userData, racecheck::deviceAccesses(accesses, count));
    return npuSuccess;
  });
}

npuError_t npuRaceCheckSetMode(npuRaceCheckMode mode) {
  constexpr const char* kFn = "npuRaceCheckSetMode";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    const int raw = rawEnumValue(mode);  // any int may arrive from C
    if (raw < npuRaceCheckOff || raw > npuRaceCheckAbort) {
      return fail(npuErrorInvalidValue, kFn,
                  "mode must be npuRaceCheckOff, npuRaceCheckError, npuRaceCheckLog or "
                  "npuRaceCheckAbort (0-3), got " +
                      std::to_string(raw));
    }
    racecheck::setMode(mode);
    return npuSuccess;
  });
}

npuError_t npuRaceCheckGetMode(npuRaceCheckMode* mode) {
  constexpr const char* kFn = "npuRaceCheckGetMode";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    if (mode == nullptr) return nullArgument(kFn, "mode");
    *mode = static_cast<npuRaceCheckMode>(racecheck::gMode.load(std::memory_order_relaxed));
    return npuSuccess;
  });
}

npuError_t npuRaceCheckGetReportCount(uint64_t* count) {
  constexpr const char* kFn = "npuRaceCheckGetReportCount";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    if (count == nullptr) return nullArgument(kFn, "count");
    *count = racecheck::reportCount();
    return npuSuccess;
  });
}

npuError_t npuRaceCheckGetLastReport(char* buf, size_t bufSize) {
  constexpr const char* kFn = "npuRaceCheckGetLastReport";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    if (buf == nullptr) return nullArgument(kFn, "buf");
    if (bufSize == 0) return fail(npuErrorInvalidValue, kFn, "bufSize must be > 0");
    const std::string text = racecheck::lastReport();
    const size_t n = std::min(text.size(), bufSize - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
    return npuSuccess;
  });
}

npuError_t npuRaceCheckResetRange(const void* ptr, size_t bytes) {
  constexpr const char* kFn = "npuRaceCheckResetRange";
  return guarded(kFn, [&](Runtime& /*rt*/) {
    if (racecheck::enabled()) racecheck::resetRange(ptr, bytes);
    return npuSuccess;
  });
}

}  // extern "C"
