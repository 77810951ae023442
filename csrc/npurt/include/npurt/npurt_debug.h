/*
 * npurt — debug knobs and test hooks of the public C API: task delays
 * (Note [Task delay]), the task trace, and fault injection (Note [Fault
 * injection]). Included by npurt/npurt.h; not meant to be included alone.
 * The conventions of npurt.h apply (statuses, last error message, thread
 * safety, CUDA equivalents).
 */
#ifndef NPURT_NPURT_DEBUG_H_
#define NPURT_NPURT_DEBUG_H_

#include <stdint.h>

#include "npurt/npurt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Debug knobs                                                              */
/* ------------------------------------------------------------------------ */

/* Every task then takes at least delayUs microseconds on the device (the
 * executor sleeps before running it). Overrides NPU_SIM_TASK_DELAY_US. */
NPURT_API npuError_t npuSetTaskDelay(uint32_t delayUs);
NPURT_API npuError_t npuGetTaskDelay(uint32_t* delayUs);

/* Per-stream delay; delayUs < 0 returns the stream to the global delay. */
NPURT_API npuError_t npuStreamSetTaskDelay(npuStream_t stream, int64_t delayUs);

/* Starts recording a trace of every task (device, stream, name, enqueue,
 * start and end time); clears what was recorded before. Also enabled at start
 * by NPU_SIM_TRACE=<path>, which writes the trace at process exit. */
NPURT_API npuError_t npuTraceStart(void);
/* Stops recording (the recorded tasks are kept). */
NPURT_API npuError_t npuTraceStop(void);
/* Writes the recorded tasks as Chrome trace JSON (one process per device, one
 * thread lane per stream), loadable by Perfetto and chrome://tracing. */
NPURT_API npuError_t npuTraceWrite(const char* path);

/* Fault injection, a test hook (Note [Fault injection] in
 * csrc/npurt/README.md). */
typedef enum npuFaultKind {
  /* The n-th npuLaunchTask / npuLaunchHostFunc call (npurt::launch
   * included) returns npuErrorLaunchFailure and enqueues nothing (release is
   * not called, as for any failed launch). */
  npuFaultLaunch = 0,
  /* The n-th work task to run (host function, user task, async memcpy or
   * memset; not event records or waits, not discarded tasks) fails instead
   * of running, with the message "injected fault", as a task failure of its
   * stream (Note [Task failure rule]); its release is still called. */
  npuFaultTask = 1,
  /* The n-th memcpy or memset call (npuMemcpy, npuMemcpyAsync, npuMemset,
   * npuMemsetAsync): a synchronous one returns npuErrorLaunchFailure
   * without copying, an asynchronous one is enqueued and fails when it runs,
   * as a task failure named "npuMemcpyAsync" / "npuMemsetAsync". */
  npuFaultCopy = 2,
  /* The n-th npuMalloc returns npuErrorMemoryAllocation. */
  npuFaultAlloc = 3
} npuFaultKind;

/* Arms a one-shot fault of `kind`: the nth call of that kind counted from
 * now fails (nth = 1: the next one); nth = 0 disarms. Only calls that pass
 * their argument checks count (e.g. not a launch on an invalid stream, not a
 * copy of 0 bytes, not npuMalloc of 0 bytes). Arming again replaces the
 * count. Process-wide; thread-safe (with concurrent callers exactly one call
 * fires). Also armed at start by NPU_SIM_FAULT=<kind>:<n> with kind launch,
 * task, copy or alloc. Returns npuErrorInvalidValue for an unknown kind.
 * No CUDA equivalent. */
NPURT_API npuError_t npuSetFaultInjection(npuFaultKind kind, uint64_t nth);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPURT_NPURT_DEBUG_H_ */
