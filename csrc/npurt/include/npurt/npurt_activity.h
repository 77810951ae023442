/*
 * npurt — activity records for profilers: every task a device runs (kernels,
 * host functions, copies, memsets, event records and waits, graph launch
 * bookkeeping) as a record with its device, stream, name, enqueue, start and
 * end time, collected while recording is enabled and handed over by
 * npuActivityFlush. The layers above turn them into a profiler's device
 * rows (csrc/profiler: Kineto's PrivateUse1 activity profiler). Include it
 * next to npurt/npurt.h (it is kept out of npurt.h so that the tiny-op path's
 * translation units do not depend on it). The conventions of npurt.h apply
 * (statuses, last error message, thread safety).
 *
 * CUDA's equivalent is CUPTI's activity API (cuptiActivityEnable,
 * cuptiActivityFlushAll, cuptiActivityPushExternalCorrelationId), reduced
 * to what a simulated device has.
 *
 * Note [Activity correlation]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A profiler links a device activity to the host operation that queued it
 * through an external correlation id: the thread that enqueues a task may
 * push one (npuActivityPushExternalCorrelationId), and every task the
 * thread enqueues while it is pushed carries it in its record
 * (externalId; 0 if none was pushed). The id is read at enqueue, not when
 * the task runs, so it names the enqueuing call however late the task runs.
 * A layer that enqueues on behalf of other threads (the framework's task
 * queue) pushes the id of the thread it acts for around the enqueue.
 *
 * Cost: while recording is off, an enqueue and a task run each test one
 * relaxed atomic flag (the same one NPU_SIM_TRACE uses) and record nothing.
 */
#ifndef NPURT_NPURT_ACTIVITY_H_
#define NPURT_NPURT_ACTIVITY_H_

#include <stdint.h>

#include "npurt/npurt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a recorded task was. CUDA: CUpti_ActivityKind (KERNEL, MEMCPY,
 * MEMSET, SYNCHRONIZATION, ...). The numeric values never change. */
typedef enum npuActivityKind {
  npuActivityKindKernel = 0,      /* npuLaunchTask (an operator) or a graph node */
  npuActivityKindHostFunc = 1,    /* npuLaunchHostFunc */
  npuActivityKindMemcpy = 2,      /* npuMemcpyAsync */
  npuActivityKindMemset = 3,      /* npuMemsetAsync */
  npuActivityKindEventRecord = 4, /* npuEventRecord */
  npuActivityKindEventWait = 5,   /* npuStreamWaitEvent */
  npuActivityKindGraph = 6        /* bookkeeping of an npuGraphLaunch */
} npuActivityKind;

/* One finished task. Times are on the npuGetTimestampNs clock. An event
 * wait that found its event incomplete starts when it blocked the stream and
 * ends when the event completed. */
typedef struct npuActivityRecord {
  npuActivityKind kind;
  int device;
  uint64_t stream;     /* npuStreamGetId of the stream that ran it */
  const char* name;    /* the task's name; valid only during the callback */
  uint32_t externalId; /* Note [Activity correlation]; 0: none */
  int failed;          /* 1 if the task failed (Note [Task failure rule]) */
  uint64_t enqueueNs;  /* 0 if it was enqueued before recording started */
  uint64_t startNs;
  uint64_t endNs;
} npuActivityRecord;

typedef void (*npuActivityCallback_t)(const npuActivityRecord* record, void* userData);

/* Discards what was recorded and starts recording. Independent of the
 * NPU_SIM_TRACE file (npuTraceStart), which may be on at the same time.
 * Thread-safe. CUDA: cuptiActivityEnable. */
NPURT_API npuError_t npuActivityEnable(void);
/* Stops recording; what was recorded is kept for npuActivityFlush. Tasks
 * running during the call may still be recorded. Thread-safe. CUDA:
 * cuptiActivityDisable. */
NPURT_API npuError_t npuActivityDisable(void);
/* Calls `callback` once per recorded task, in the order the tasks finished,
 * then discards them. Records of tasks still running are not included (for
 * all of a region, synchronize the devices first). The callback runs on the
 * calling thread with an internal lock released; it must not call
 * npuActivityFlush. Errors: npuErrorInvalidValue if callback is NULL.
 * Thread-safe. CUDA: cuptiActivityFlushAll. */
NPURT_API npuError_t npuActivityFlush(npuActivityCallback_t callback, void* userData);
/* Pushes / pops the calling thread's external correlation id (Note [Activity
 * correlation]); ids nest. Pop stores the popped id in *id if id is not
 * NULL; popping an empty stack is npuErrorIllegalState. Push of 0 is
 * npuErrorInvalidValue (0 means "none"). Thread-local. CUDA:
 * cuptiActivityPushExternalCorrelationId / Pop. */
NPURT_API npuError_t npuActivityPushExternalCorrelationId(uint32_t id);
NPURT_API npuError_t npuActivityPopExternalCorrelationId(uint32_t* id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPURT_NPURT_ACTIVITY_H_ */
