/*
 * npurt — the device race detector (Note [Happens-before model] in
 * csrc/npurt/src/racecheck/racecheck.h; user guide: docs/DEBUGGING.md,
 * "Device race detector"). Included by npurt/npurt.h; not meant to be
 * included alone. The conventions of npurt.h apply (statuses, last error
 * message, thread safety). No CUDA equivalent: compute-sanitizer's racecheck
 * checks shared memory inside one kernel; this checks device memory between
 * tasks of different streams.
 *
 * With the detector on, every task's declared memory accesses are checked,
 * when the task starts on the device, against the accesses of tasks it is
 * not ordered after (by stream order, event record/wait or a host
 * synchronization). Copies and memsets declare theirs; a library declares
 * its kernels' accesses with npuTaskDeclareAccesses before it launches them.
 * Only device memory (npuMalloc) is checked; host memory is the host's.
 */
#ifndef NPURT_NPURT_RACECHECK_H_
#define NPURT_NPURT_RACECHECK_H_

#include <stddef.h>
#include <stdint.h>

#include "npurt/npurt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the detector does. Also set at start by NPU_SIM_RACECHECK=0, 1 (or
 * error), log or abort. */
typedef enum npuRaceCheckMode {
  /* No checking; the only cost is one relaxed load per launch and per task. */
  npuRaceCheckOff = 0,
  /* A task that races fails instead of running, as a task failure of its
   * stream (Note [Task failure rule]) whose message names both tasks, their
   * streams and ranges; reported once, by that stream's next synchronize or
   * query or the device's synchronize. */
  npuRaceCheckError = 1,
  /* The report is written to stderr and the task runs. */
  npuRaceCheckLog = 2,
  /* The report is written to stderr and the process aborts. */
  npuRaceCheckAbort = 3
} npuRaceCheckMode;

/* How a task uses a range (bit flags). */
#define npuMemAccessRead 0x1u
#define npuMemAccessWrite 0x2u
#define npuMemAccessReadWrite 0x3u

/* A range of device memory a task reads and/or writes. */
typedef struct npuMemAccess {
  const void* ptr; /* first byte */
  size_t bytes;    /* 0: ignored */
  unsigned int mode; /* npuMemAccessRead, npuMemAccessWrite or both */
} npuMemAccess;

/* Declares the device memory that the task whose npuTask::userData (or host
 * function argument) is `userData` will access; call it before the launch
 * (npuLaunchTask, npuLaunchHostFunc, a capture of either, or
 * npuGraphExecUpdateTaskGroup), which consumes the declaration. A second
 * declaration for the same userData before the launch replaces the first;
 * count 0 withdraws it (do that if the launch fails: a declaration left
 * behind would be taken by a later task whose userData has the same
 * address). Ranges outside device memory are ignored. While the detector is off the
 * call checks its arguments and does nothing else. The C++ helper
 * npurt::launch(stream, name, accesses, f) declares for you.
 * Errors: npuErrorInvalidValue for a NULL userData, accesses NULL with
 * count > 0, or a mode that is not a non-empty combination of the flags.
 * Thread-safe. */
NPURT_API npuError_t npuTaskDeclareAccesses(const void* userData, const npuMemAccess* accesses,
                                            size_t count);

/* Switches the detector. Turning it on starts from an empty history: work
 * enqueued before is not checked, and events recorded before order nothing.
 * Errors: npuErrorInvalidValue for an unknown mode. Thread-safe. */
NPURT_API npuError_t npuRaceCheckSetMode(npuRaceCheckMode mode);
NPURT_API npuError_t npuRaceCheckGetMode(npuRaceCheckMode* mode);

/* [out] count: races reported since the process started (every mode).
 * Thread-safe. */
NPURT_API npuError_t npuRaceCheckGetReportCount(uint64_t* count);

/* Copies the latest report (NUL-terminated, truncated to bufSize) into buf;
 * "" if there was none. Errors: npuErrorInvalidValue for a NULL buf or a
 * bufSize of 0. Thread-safe. */
NPURT_API npuError_t npuRaceCheckGetLastReport(char* buf, size_t bufSize);

/* Forgets the access history of [ptr, ptr + bytes): for an allocator that
 * hands out memory again, whose own stream and event logic orders the new
 * owner after the old one. npuMalloc does this for its allocations. A no-op
 * while the detector is off. Thread-safe. */
NPURT_API npuError_t npuRaceCheckResetRange(const void* ptr, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPURT_NPURT_RACECHECK_H_ */
