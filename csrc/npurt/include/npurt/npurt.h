/*
 * npurt — the simulated NPU device runtime. Public C API.
 *
 * Layer: device runtime (bottom layer). Depends on the C/C++ standard library
 * only; knows nothing of PyTorch.
 *
 * Model (see docs/ARCHITECTURE.md and the notes in csrc/npurt/README.md):
 *  - A process sees NPU_SIM_DEVICE_COUNT devices (default 2). Each device owns
 *    NPU_SIM_CORES executor threads (default 2), started on first use.
 *  - A stream is an in-order queue of tasks. At most one task of a stream
 *    runs at a time, in enqueue order; tasks of different streams run
 *    concurrently, up to the number of cores. Higher-priority streams are
 *    picked first. A stream whose head task waits on an event is parked and
 *    holds no core.
 *  - Events are versioned: every record creates a new version; a wait or a
 *    query binds to the version that was latest when it was called.
 *  - Device memory is host memory, allocated on demand; the per-device
 *    capacity NPU_SIM_MEMORY_MB (default 8192) is enforced.
 *
 * Handles (npuStream_t, npuEvent_t, npuGraph_t, npuGraphExec_t) are opaque
 * 64-bit identifiers that are never reused within a process. Every call
 * validates them: a NULL, garbage or destroyed handle yields
 * npuErrorInvalidResourceHandle, never a crash.
 *
 * Error rule: every function returns an npuError_t. A failing call also
 * stores a human-readable message, retrievable on the same thread with
 * npuGetLastErrorMessage(). No function throws or aborts.
 *
 * Process exit (Note [Shutdown order]): once the runtime's atexit hook has
 * begun, npuFree, npuFreeHost, npuHostUnregister, npuEventDestroy,
 * npuStreamDestroy, npuGraphDestroy and npuGraphExecDestroy do nothing and
 * return npuSuccess (so static destructors may free); every other call
 * returns npuErrorRuntimeShutdown.
 *
 * Thread safety: unless a function says otherwise, it may be called from any
 * number of host threads at once.
 *
 * CUDA equivalents are given as "CUDA: name".
 */
#ifndef NPURT_NPURT_H_
#define NPURT_NPURT_H_

#include <stddef.h>
#include <stdint.h>

#include "npurt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/* Status of every npurt call. CUDA: cudaError_t. The numeric values are part
 * of the ABI (ctypes users compare against them) and never change. */
typedef enum npuError_t {
  npuSuccess = 0,
  /* An argument is out of range or NULL where a pointer is required. */
  npuErrorInvalidValue = 1,
  /* Device memory capacity exceeded, or host allocation failed. */
  npuErrorMemoryAllocation = 2,
  /* Runtime configuration (environment variables) is invalid, or this is a
   * forked child of a process that used npurt (npuGetForkState). Sticky:
   * every later call fails the same way. */
  npuErrorInitializationError = 3,
  /* Device ordinal out of [0, device count). */
  npuErrorInvalidDevice = 4,
  /* NULL, garbage or destroyed stream or event handle. */
  npuErrorInvalidResourceHandle = 5,
  /* Pointer is not (inside) a live device allocation, or a range overruns
   * the allocation that contains it. */
  npuErrorInvalidDevicePointer = 6,
  /* Work is still queued or running (query functions only). */
  npuErrorNotReady = 7,
  /* A timed wait expired before the work completed. */
  npuErrorTimeout = 8,
  /* A task failed while running on the device. The message names the task.
   * See Note [Task failure rule] in csrc/npurt/README.md. */
  npuErrorLaunchFailure = 9,
  /* The memcpy kind does not match the pointers given. */
  npuErrorInvalidMemcpyDirection = 10,
  /* Elapsed time asked of an event created with npuEventDisableTiming. */
  npuErrorTimingDisabled = 11,
  /* Elapsed time or timestamp asked of an event that was never recorded. */
  npuErrorEventNotRecorded = 12,
  /* Host range already registered (npuHostRegister). */
  npuErrorHostMemoryAlreadyRegistered = 13,
  /* Pointer is not the start of a registered host range. */
  npuErrorHostMemoryNotRegistered = 14,
  /* The runtime is shutting down (process exit in progress). Frees and
   * destroys return npuSuccess instead (see the top of this file). */
  npuErrorRuntimeShutdown = 15,
  /* Operation not supported by the simulated device. */
  npuErrorNotSupported = 16,
  /* The operation is not permitted while a stream captures (Note [Stream
   * capture]): synchronize or query of a capturing stream, a potentially
   * unsafe call under a global or thread-local capture, a task launched
   * with npuTaskNotReplayable. The capture concerned is invalidated.
   * CUDA: cudaErrorStreamCaptureUnsupported. */
  npuErrorStreamCaptureUnsupported = 17,
  /* The capture was invalidated by an earlier error; it records nothing
   * more and npuStreamEndCapture fails. CUDA:
   * cudaErrorStreamCaptureInvalidated. */
  npuErrorStreamCaptureInvalidated = 18,
  /* npuStreamEndCapture: a stream forked into the capture never joined the
   * origin stream again. CUDA: cudaErrorStreamCaptureUnjoined. */
  npuErrorStreamCaptureUnjoined = 19,
  /* npuStreamEndCapture of a global or thread-local capture from a thread
   * other than the one that began it. CUDA: cudaErrorStreamCaptureWrongThread. */
  npuErrorStreamCaptureWrongThread = 20,
  /* A capturing stream waited on work outside its capture (an incomplete
   * event version recorded outside it, or an event of another capture).
   * CUDA: cudaErrorStreamCaptureIsolation. */
  npuErrorStreamCaptureIsolation = 21,
  /* The event was last recorded in a capture: it has no version to query,
   * synchronize or time until it is recorded outside a capture again.
   * CUDA: cudaErrorCapturedEvent. */
  npuErrorCapturedEvent = 22,
  /* npuStreamBeginCapture of a stream that already captures, or an
   * npuStreamEndCapture / scope or group end without its begin. CUDA:
   * cudaErrorIllegalState. */
  npuErrorIllegalState = 23,
  /* npuStreamEndCapture on a stream that joined a capture instead of the
   * stream that began it. CUDA: cudaErrorStreamCaptureUnmatched. */
  npuErrorStreamCaptureUnmatched = 24,
  /* npuGraphExecUpdateTaskGroup: the new tasks do not match the group
   * (count or node kind). CUDA: cudaErrorGraphExecUpdateFailure. */
  npuErrorGraphExecUpdateFailure = 25,
  /* Internal error (a bug in npurt). */
  npuErrorUnknown = 999
} npuError_t;

/* Name of a status, e.g. "npuErrorInvalidValue". Never NULL; unknown values
 * give "npuErrorUnrecognized". CUDA: cudaGetErrorName. */
NPURT_API const char* npuGetErrorName(npuError_t error);

/* One-sentence description of a status. Never NULL. CUDA: cudaGetErrorString. */
NPURT_API const char* npuGetErrorString(npuError_t error);

/* Detailed message of the most recent failing npurt call on the calling
 * thread (e.g. "npuStreamSynchronize: task 'aten::add' failed: ..."), or ""
 * if no call failed yet. The pointer stays valid until the next npurt call on
 * this thread. Thread-local. */
NPURT_API const char* npuGetLastErrorMessage(void);

/* [out] inForkedChild: 1 if this process is the fork() child of a process
 * whose runtime was initialised, 0 otherwise. In such a child every other
 * npurt call (except the status-name, last-message and timestamp functions)
 * returns npuErrorInitializationError with a message naming the fork, and
 * the exit hook does nothing: the parent's executor threads do not exist in
 * the child. A child of a process that never called npurt may use it
 * normally. See Note [Fork]. Works in any process state (forked child,
 * invalid configuration, after exit) and never initialises the runtime.
 * Thread-safe. Returns npuErrorInvalidValue (NULL). No CUDA equivalent
 * (CUDA fails such calls with cudaErrorInitializationError too). */
NPURT_API npuError_t npuGetForkState(int* inForkedChild);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct npuDeviceProp {
  char name[64];          /* "NPU-SIM-<index>", or socName when one is set */
  int index;              /* device ordinal */
  int coreCount;          /* executor threads of this device */
  size_t totalMemory;     /* capacity in bytes (NPU_SIM_MEMORY_MB) */
  size_t freeMemory;      /* capacity minus bytes currently allocated */
  char socName[32];       /* the chip model simulated (NPU_SIM_SOC_VERSION, e.g.
                             "Ascend910B1"), "" for none (the default) */
} npuDeviceProp;

/* [out] count: number of devices. CUDA: cudaGetDeviceCount.
 * Returns npuErrorInvalidValue (count NULL), npuErrorInitializationError. */
NPURT_API npuError_t npuGetDeviceCount(int* count);

/* [out] count: the number of devices the runtime would see if it started
 * now. Before the runtime is initialised it reads NPU_SIM_DEVICE_COUNT and
 * ASCEND_RT_VISIBLE_DEVICES afresh at every call and builds nothing, so a
 * process may still change them (as PyTorch counts CUDA devices through NVML
 * before initialising); afterwards it is npuGetDeviceCount. Thread-safe (a
 * call racing with the initialisation may see either). No CUDA equivalent.
 * Returns npuErrorInvalidValue (count NULL), npuErrorInitializationError (the
 * environment is invalid, with the reason). */
NPURT_API npuError_t npuProbeDeviceCount(int* count);

/* Sets the op execution timeout of the process: a work task (kernel, copy,
 * memset, host function) that runs longer than timeoutUs microseconds on an
 * executor, its simulated delay (NPU_SIM_TASK_DELAY_US) included, fails with
 * a timeout message and puts its stream in the failure state (Note [Op
 * execution timeout] in csrc/npurt/README.md). 0 (the default) is no
 * timeout. Applies to tasks that start after the call. Thread-safe.
 * ACL: aclrtSetOpExecuteTimeOutV2. Returns npuErrorInitializationError. */
NPURT_API npuError_t npuSetOpExecuteTimeout(uint64_t timeoutUs);

/* [out] timeoutUs: the op execution timeout, 0 for none. Thread-safe.
 * Returns npuErrorInvalidValue (timeoutUs NULL). */
NPURT_API npuError_t npuGetOpExecuteTimeout(uint64_t* timeoutUs);

/* Sets the calling thread's current device (default 0). Thread-local.
 * CUDA: cudaSetDevice. Returns npuErrorInvalidDevice. */
NPURT_API npuError_t npuSetDevice(int device);

/* [out] device: the calling thread's current device. CUDA: cudaGetDevice. */
NPURT_API npuError_t npuGetDevice(int* device);

/* Blocks until every task enqueued before the call on any stream of the
 * current device (including destroyed streams still draining) has finished.
 * Work enqueued during the call is not waited for, so producers that keep
 * enqueuing cannot starve it. Reports and clears the first task failure held
 * by any stream of the device (npuErrorLaunchFailure). Thread-safe.
 * CUDA: cudaDeviceSynchronize. */
NPURT_API npuError_t npuDeviceSynchronize(void);

/* [out] prop for device. CUDA: cudaGetDeviceProperties. */
NPURT_API npuError_t npuGetDeviceProperties(npuDeviceProp* prop, int device);

/* [out] free, total bytes of the current device. CUDA: cudaMemGetInfo. */
NPURT_API npuError_t npuMemGetInfo(size_t* free, size_t* total);

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct npuStream_st* npuStream_t;
typedef struct npuEvent_st* npuEvent_t;

#define npuStreamDefault 0x0u
#define npuStreamNonBlocking 0x1u

/* Priority range: lower numbers are higher priority, as in CUDA.
 * npuDeviceGetStreamPriorityRange reports [least=0, greatest=-3]. */
NPURT_API npuError_t npuDeviceGetStreamPriorityRange(int* leastPriority,
                                                     int* greatestPriority);

/* The share (0-100) of the device's cores' time spent running work over the
 * last second: its executor threads' busy time (simulated task delays
 * included) over cores x the window (Note [Device utilization] in
 * src/utilization.h). One stream kept busy on a two-core device is 50.
 * npuErrorInvalidDevice for a device out of range. Thread-safe. */
NPURT_API npuError_t npuDeviceGetUtilization(int device, unsigned int* percent);

/* Creates a stream on the current device with default flags and priority 0.
 * [out] stream. CUDA: cudaStreamCreate. */
NPURT_API npuError_t npuStreamCreate(npuStream_t* stream);

/* As npuStreamCreate with flags (npuStreamDefault or npuStreamNonBlocking;
 * other bits → npuErrorInvalidValue). */
NPURT_API npuError_t npuStreamCreateWithFlags(npuStream_t* stream,
                                              unsigned int flags);

/* As npuStreamCreateWithFlags with a priority; values outside the range are
 * clamped to it, as CUDA does. */
NPURT_API npuError_t npuStreamCreateWithPriority(npuStream_t* stream,
                                                 unsigned int flags,
                                                 int priority);

/* Destroys a stream. Returns at once; work already queued still runs, in
 * order. The handle is invalid as soon as this returns (and for every later
 * call, even if a new stream is created afterwards). Stream-destroy callbacks
 * run on the calling thread before the handle is invalidated.
 * CUDA: cudaStreamDestroy. */
NPURT_API npuError_t npuStreamDestroy(npuStream_t stream);

/* npuSuccess if nothing is queued or running on the stream, npuErrorNotReady
 * otherwise; npuErrorLaunchFailure (once, then cleared) if a task failed.
 * CUDA: cudaStreamQuery. */
NPURT_API npuError_t npuStreamQuery(npuStream_t stream);

/* npuErrorLaunchFailure if the stream holds an unreported task failure
 * (Note [Task failure rule]), with the failure's message as the calling
 * thread's last error message; npuSuccess otherwise (whether or not work is
 * queued). Unlike npuStreamQuery it does not report the failure: the stream
 * stays in failure state and the next query or synchronize still reports it.
 * May be called from a task's run or release function on an executor thread
 * (e.g. to poison the outputs of a task discarded after a failure).
 * Thread-safe. Returns npuErrorInvalidResourceHandle for a bad handle.
 * CUDA: cudaPeekAtLastError (per stream here). */
NPURT_API npuError_t npuStreamPeekAtLastError(npuStream_t stream);

/* Blocks until every task enqueued on the stream before the call has
 * finished (run or discarded). Work enqueued during the call is not waited
 * for (a thread that keeps enqueuing cannot starve it), so the stream need
 * not be idle when it returns. Then reports a task failure held by the
 * stream like npuStreamQuery (npuErrorLaunchFailure, once, then cleared).
 * Thread-safe. CUDA: cudaStreamSynchronize. */
NPURT_API npuError_t npuStreamSynchronize(npuStream_t stream);

/* As npuStreamSynchronize, giving up after timeoutUs microseconds with
 * npuErrorTimeout (timeoutUs < 0 → npuErrorInvalidValue); a failure is not
 * reported by a call that timed out. */
NPURT_API npuError_t npuStreamSynchronizeWithTimeout(npuStream_t stream,
                                                     int64_t timeoutUs);

/* Makes all work enqueued on stream after this call wait for the version of
 * event that is latest now. An event never recorded: no-op. flags must be 0.
 * CUDA: cudaStreamWaitEvent. */
NPURT_API npuError_t npuStreamWaitEvent(npuStream_t stream, npuEvent_t event,
                                        unsigned int flags);

/* [out] device of the stream. */
NPURT_API npuError_t npuStreamGetDevice(npuStream_t stream, int* device);

/* [out] priority of the stream (after clamping). CUDA: cudaStreamGetPriority. */
NPURT_API npuError_t npuStreamGetPriority(npuStream_t stream, int* priority);

/* [out] flags given at creation. CUDA: cudaStreamGetFlags. */
NPURT_API npuError_t npuStreamGetFlags(npuStream_t stream, unsigned int* flags);

/* [out] id: process-unique stream id (1, 2, ...); never reused.
 * CUDA: cudaStreamGetId. */
NPURT_API npuError_t npuStreamGetId(npuStream_t stream, uint64_t* id);

/* Host function launched on a stream. CUDA: cudaHostFn_t. */
typedef void (*npuHostFn_t)(void* userData);

/* Enqueues fn(userData) on the stream; it runs on a device executor thread
 * after all earlier work of the stream. fn must not call npurt functions that
 * wait on the same stream. CUDA: cudaLaunchHostFunc. */
NPURT_API npuError_t npuLaunchHostFunc(npuStream_t stream, npuHostFn_t fn,
                                       void* userData);

/* General task: run() returns 0 on success; on failure it returns non-zero
 * and may write a NUL-terminated message into errorBuf (errorBufSize bytes).
 * The failure is captured with the task's name (see npuErrorLaunchFailure).
 * release(userData), if not NULL, is called exactly once: after run(), or
 * instead of run() when the task is discarded (stream in failure state, or
 * process exit). The C++ helper npurt::launch builds on this. */
typedef struct npuTask {
  const char* name;  /* for errors and traces; NULL → "task" */
  int (*run)(void* userData, char* errorBuf, size_t errorBufSize);
  void (*release)(void* userData);
  void* userData;
  unsigned int flags; /* 0, or npuTaskCopyName */
} npuTask;

/* Task flag: copy name (otherwise it must be a string with static storage
 * duration, e.g. a literal or an operator schema name). */
#define npuTaskCopyName 0x1u
/* Task flag: run() consumes userData and cannot run twice. Launching such a
 * task on a capturing stream fails with npuErrorStreamCaptureUnsupported and
 * invalidates the capture (Note [Replayable tasks]); eager launches ignore
 * the flag. */
#define npuTaskNotReplayable 0x2u

/* Enqueues a task. On error the task is not enqueued and release() is NOT
 * called (the caller still owns userData). On a capturing stream the task is
 * recorded instead (Note [Replayable tasks]): run() is then called once per
 * launch of a graph made from the capture, and release() once, when the
 * capture fails or the graph and every graph exec holding the task are
 * destroyed. Without npuTaskCopyName, npurt
 * remembers each distinct (name, run, release) for the life of the process
 * (up to 4096 of them), so that such tasks are enqueued without allocating;
 * more distinct triples work too, with one more ring entry each. */
NPURT_API npuError_t npuLaunchTask(npuStream_t stream, const npuTask* task);

/* Memory for a task's userData. A task's userData is typically allocated on
 * the launching thread and freed in release() on a device executor; malloc
 * serves that cross-thread pattern badly (with glibc every such allocation
 * and free takes the arena's lock, and the two threads contend for it).
 * These blocks are recycled between threads without locks instead. *ptr
 * receives at least `size` bytes aligned to 64; size must be > 0.
 * No CUDA equivalent. Thread-safe. */
NPURT_API npuError_t npuTaskDataAlloc(void** ptr, size_t size);

/* Returns a block from npuTaskDataAlloc; `size` must be the size it was
 * allocated with. NULL is accepted and ignored. May be called on any thread,
 * including inside release() and after the runtime has shut down.
 * Thread-safe. */
NPURT_API npuError_t npuTaskDataFree(void* ptr, size_t size);

/* ------------------------------------------------------------------------ */
/* Stream capture and graphs (Note [Stream capture], Note [Graph launch])   */
/* ------------------------------------------------------------------------ */

/* A graph: the work recorded by a capture, as nodes with dependencies.
 * An executable graph: a graph prepared for launching. Both are validated
 * handles like streams and events (npuErrorInvalidResourceHandle). CUDA:
 * cudaGraph_t, cudaGraphExec_t. */
typedef struct npuGraph_st* npuGraph_t;
typedef struct npuGraphExec_st* npuGraphExec_t;
/* A task group recorded during a capture (npuStreamEndTaskGroup); 0 is
 * never a group. No CUDA equivalent. */
typedef uint64_t npuTaskGroup_t;

/* Which threads a capture forbids potentially unsafe calls (npuMemcpy,
 * npuMemset, npuDeviceSynchronize; Note [Stream capture]). CUDA:
 * cudaStreamCaptureMode. */
typedef enum npuStreamCaptureMode {
  /* Every thread, while the capture lasts. */
  npuStreamCaptureModeGlobal = 0,
  /* The thread that began the capture. */
  npuStreamCaptureModeThreadLocal = 1,
  /* No thread. */
  npuStreamCaptureModeRelaxed = 2
} npuStreamCaptureMode;

/* CUDA: cudaStreamCaptureStatus. */
typedef enum npuStreamCaptureStatus {
  npuStreamCaptureStatusNone = 0,        /* not capturing */
  npuStreamCaptureStatusActive = 1,      /* capturing */
  npuStreamCaptureStatusInvalidated = 2  /* capturing, but invalidated: end it */
} npuStreamCaptureStatus;

/* Starts capturing on `stream`: from now on launches, host functions, async
 * copies and memsets, event records and event waits issued on it are
 * recorded, not run, until npuStreamEndCapture. Work queued before the call
 * still runs. Errors: npuErrorInvalidValue (unknown mode),
 * npuErrorIllegalState (already capturing, or part of another capture).
 * Thread-safe. CUDA: cudaStreamBeginCapture. */
NPURT_API npuError_t npuStreamBeginCapture(npuStream_t stream, npuStreamCaptureMode mode);

/* Ends the capture begun on `stream`; every stream that joined it stops
 * capturing. [out] graph: the recorded graph (NULL on error; owned by the
 * caller, npuGraphDestroy). Errors: npuErrorIllegalState (not capturing),
 * npuErrorStreamCaptureUnmatched (a joined stream, not the origin),
 * npuErrorStreamCaptureWrongThread (global/thread-local capture, other
 * thread; the capture goes on), npuErrorStreamCaptureInvalidated (an earlier
 * error invalidated it; the message says which), npuErrorStreamCaptureUnjoined
 * (a forked stream never joined back). On every error but WrongThread the
 * capture is over and its tasks are released. Thread-safe.
 * CUDA: cudaStreamEndCapture. */
NPURT_API npuError_t npuStreamEndCapture(npuStream_t stream, npuGraph_t* graph);

/* [out] status of the stream's capture. Thread-safe.
 * CUDA: cudaStreamIsCapturing. */
NPURT_API npuError_t npuStreamIsCapturing(npuStream_t stream, npuStreamCaptureStatus* status);

/* As npuStreamIsCapturing, with [out] id, the process-unique id of the
 * capture (0 when not capturing; may be NULL). Thread-safe.
 * CUDA: cudaStreamGetCaptureInfo. */
NPURT_API npuError_t npuStreamGetCaptureInfo(npuStream_t stream, npuStreamCaptureStatus* status,
                                             uint64_t* id);

/* Conditional nodes (Note [Conditional nodes] in csrc/npurt/README.md).
 * npuStreamBeginCaptureToIf adds an "if" node to the capture `stream`
 * records into, after the work captured on `stream` so far (its later
 * captured work follows the node), and makes `body`, a stream that does not
 * capture, capture the node's body: the work captured on `body`, and on
 * streams forked from it, until npuStreamEndCaptureToIf(body). At every
 * launch the node reads the byte at `condition`, device memory of the
 * capture's device that the captured work before the node sets (the node
 * keeps its allocation alive, not its contents), and runs the body when it
 * is non-zero. Bodies nest (`stream` may itself capture a body); a body is
 * a capture of its own (its own capture id and mode, the mode of `stream`'s
 * capture), but an error that invalidates it invalidates every capture of
 * the tree, and the root capture cannot end while a body is open. The body
 * runs its nodes one after another inside the node. Task groups are not
 * supported inside a body, and an if node cannot be part of one.
 * Errors of Begin: npuErrorIllegalState (`stream` not capturing, `body`
 * capturing), npuErrorStreamCaptureInvalidated, npuErrorInvalidValue
 * (condition NULL, body or condition on another device),
 * npuErrorInvalidDevicePointer (condition not device memory),
 * npuErrorNotSupported (inside a task group). End's are npuStreamEndCapture's,
 * npuErrorIllegalState also for a stream that does not capture a body. On
 * success the body belongs to the node. Thread-safe. CUDA: a conditional
 * node of type cudaGraphCondTypeIf with cudaStreamBeginCaptureToGraph into
 * its body graph; the node reads device memory instead of a conditional
 * handle. */
NPURT_API npuError_t npuStreamBeginCaptureToIf(npuStream_t stream, const void* condition,
                                               npuStream_t body);
NPURT_API npuError_t npuStreamEndCaptureToIf(npuStream_t body);

/* Task groups (for updating captured kernels' arguments later): nodes
 * captured on `stream` between Begin and End form a group. Groups do not
 * nest on one stream. End gives [out] group, valid for the graph the capture
 * makes and every exec instantiated from it. Errors: npuErrorIllegalState
 * (not capturing, or Begin twice / End without Begin). Thread-safe.
 * No CUDA equivalent (CUDA updates one node at a time). */
NPURT_API npuError_t npuStreamBeginTaskGroup(npuStream_t stream);
NPURT_API npuError_t npuStreamEndTaskGroup(npuStream_t stream, npuTaskGroup_t* group);

/* Replaces the tasks of a group's nodes in an exec: tasks[i] replaces the
 * i-th node captured in the group, for every launch issued after this call
 * (launches already issued keep the old tasks). Every node of the group must
 * be a task node (npuLaunchTask) and count must equal the group's size, else
 * npuErrorGraphExecUpdateFailure and nothing changes. On success the exec
 * owns the new tasks (released as captured tasks are, Note [Replayable
 * tasks]) and drops its references to the old ones; on error the caller
 * keeps them. Errors also: npuErrorInvalidResourceHandle (exec),
 * npuErrorInvalidValue (unknown group, NULL tasks with count > 0, a task
 * without run). Thread-safe. CUDA: cudaGraphExecKernelNodeSetParams, for a
 * whole group at once. */
NPURT_API npuError_t npuGraphExecUpdateTaskGroup(npuGraphExec_t exec, npuTaskGroup_t group,
                                                 const npuTask* tasks, size_t count);

/* Fused scopes: nodes captured on `stream` between Begin and End become one
 * node (named `name`, copied; NULL -> "fused") that runs them in capture
 * order as one device task. Inside a scope the stream may not wait on
 * events (npuErrorStreamCaptureUnsupported, invalidating the capture).
 * Errors: npuErrorIllegalState (not capturing, nested Begin, End without
 * Begin). Thread-safe. No CUDA equivalent. */
NPURT_API npuError_t npuStreamBeginFusedScope(npuStream_t stream, const char* name);
NPURT_API npuError_t npuStreamEndFusedScope(npuStream_t stream);

/* [out] count: number of nodes of the graph. Thread-safe.
 * CUDA: cudaGraphGetNodes(graph, NULL, &count). */
NPURT_API npuError_t npuGraphGetNodeCount(npuGraph_t graph, size_t* count);

/* Makes an executable graph of `graph` (which stays usable and may be
 * destroyed independently). flags must be 0. The exec runs on the device of
 * the capture's origin stream. Thread-safe.
 * CUDA: cudaGraphInstantiate. */
NPURT_API npuError_t npuGraphInstantiate(npuGraphExec_t* exec, npuGraph_t graph,
                                         unsigned long long flags);

/* Enqueues one run of the whole graph on `stream` (Note [Graph launch]):
 * its nodes start after the work enqueued on the stream before, and after
 * the previous launch of `exec`; independent nodes run concurrently on the
 * device's executors; work enqueued on the stream afterwards (event records
 * included) waits for every node. A failing node fails the launch stream
 * (Note [Task failure rule]) and skips the nodes not started yet. Errors:
 * npuErrorInvalidResourceHandle, npuErrorStreamCaptureUnsupported (stream
 * is capturing; invalidates the capture). Thread-safe.
 * CUDA: cudaGraphLaunch. */
NPURT_API npuError_t npuGraphLaunch(npuGraphExec_t exec, npuStream_t stream);

/* Destroys a graph. Execs made from it are unaffected; a captured task is
 * released once neither the graph nor any exec holds it. Thread-safe.
 * CUDA: cudaGraphDestroy. */
NPURT_API npuError_t npuGraphDestroy(npuGraph_t graph);

/* Destroys an exec. Launches already issued still run to completion.
 * Thread-safe. CUDA: cudaGraphExecDestroy. */
NPURT_API npuError_t npuGraphExecDestroy(npuGraphExec_t exec);

/* Writes the graph as Graphviz DOT to `path`: one box per node (kind, name,
 * parameters), one arrow per dependency; a fused scope is one node. flags
 * must be 0. Errors: npuErrorInvalidValue (path NULL, file not writable).
 * Thread-safe. CUDA: cudaGraphDebugDotPrint. */
NPURT_API npuError_t npuGraphDebugDotPrint(npuGraph_t graph, const char* path,
                                           unsigned int flags);

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

#define npuEventDefault 0x0u
#define npuEventBlockingSync 0x1u
#define npuEventDisableTiming 0x2u

/* [out] event with default flags (timing enabled). CUDA: cudaEventCreate. */
NPURT_API npuError_t npuEventCreate(npuEvent_t* event);

/* As npuEventCreate with flags (unknown bits → npuErrorInvalidValue). */
NPURT_API npuError_t npuEventCreateWithFlags(npuEvent_t* event,
                                             unsigned int flags);

/* Records a new version of the event on the stream: it completes when all
 * work enqueued on the stream before it has finished. CUDA: cudaEventRecord. */
NPURT_API npuError_t npuEventRecord(npuEvent_t event, npuStream_t stream);

/* npuSuccess if the latest version has completed (or the event was never
 * recorded), npuErrorNotReady otherwise. CUDA: cudaEventQuery. */
NPURT_API npuError_t npuEventQuery(npuEvent_t event);

/* Blocks until the version latest at the time of the call has completed.
 * Never recorded: returns at once. CUDA: cudaEventSynchronize. */
NPURT_API npuError_t npuEventSynchronize(npuEvent_t event);

/* [out] ms between the completion of start and end. Errors:
 * npuErrorTimingDisabled (either created with npuEventDisableTiming),
 * npuErrorEventNotRecorded, npuErrorNotReady (not complete yet).
 * CUDA: cudaEventElapsedTime. */
NPURT_API npuError_t npuEventElapsedTime(float* ms, npuEvent_t start,
                                         npuEvent_t end);

/* [out] completion time of the latest version, in nanoseconds on the
 * runtime's monotonic clock (npuGetTimestampNs). Errors as ElapsedTime. */
NPURT_API npuError_t npuEventGetTimestamp(npuEvent_t event, uint64_t* ns);

/* [out] device the event was last recorded on (-1 if never recorded). */
NPURT_API npuError_t npuEventGetDevice(npuEvent_t event, int* device);

/* Destroys the event. Pending versions still complete; waits already bound
 * to them still resolve. CUDA: cudaEventDestroy. */
NPURT_API npuError_t npuEventDestroy(npuEvent_t event);

/* A version of an event that the host completes instead of a stream. */
typedef struct npuDeferredRecord_st* npuDeferredRecord_t;

/* Makes a new version of `event` the latest, as npuEventRecord does, that no
 * stream completes: it completes when npuEventCompleteDeferred(*record) is
 * called. Meanwhile streams waiting on it are parked and hold no executor
 * core (Note [Event versioning]), npuEventQuery returns npuErrorNotReady and
 * npuEventSynchronize blocks. The caller owns the version: it must complete
 * it exactly once (destroying the event does not: waits bound to the version
 * would wait forever). [out] record: a validated handle. Its timestamp is
 * the completion's time; its device is the calling thread's current device.
 * Thread-safe. No CUDA equivalent (an OpenCL user event; CUDA's nearest is
 * an external semaphore signalled by the host). */
NPURT_API npuError_t npuEventRecordDeferred(npuEvent_t event, npuDeferredRecord_t* record);

/* Completes a deferred version and invalidates its handle (a second call
 * returns npuErrorInvalidResourceHandle). May be called from any thread,
 * including a task's run or release on an executor, and also while the
 * process exits (then it still completes the version, so that no waiter
 * hangs). Thread-safe. */
NPURT_API npuError_t npuEventCompleteDeferred(npuDeferredRecord_t record);

/* Nanoseconds on the runtime's monotonic clock (steady clock). */
NPURT_API uint64_t npuGetTimestampNs(void);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum npuMemcpyKind {
  npuMemcpyHostToHost = 0,
  npuMemcpyHostToDevice = 1,
  npuMemcpyDeviceToHost = 2,
  npuMemcpyDeviceToDevice = 3,
  npuMemcpyDefault = 4 /* inferred from the pointers */
} npuMemcpyKind;

/* Allocates size bytes of device memory on the current device (64-byte
 * aligned; size 0 gives NULL and npuSuccess). npuErrorMemoryAllocation if the
 * capacity would be exceeded. CUDA: cudaMalloc. */
NPURT_API npuError_t npuMalloc(void** devPtr, size_t size);

/* Frees device memory. NULL is a no-op. A pointer that is not the start of a
 * live allocation → npuErrorInvalidDevicePointer. Asynchronous copies already
 * queued on it keep the memory alive until they finish; the capacity is
 * released then. CUDA: cudaFree (which, unlike this, synchronizes). */
NPURT_API npuError_t npuFree(void* devPtr);

/* Synchronous copy on the calling thread. Device ranges are checked against
 * live allocations. Does not wait for any stream: synchronize the streams that
 * write src or dst first. CUDA: cudaMemcpy. */
NPURT_API npuError_t npuMemcpy(void* dst, const void* src, size_t count,
                               npuMemcpyKind kind);

/* Enqueues a copy on the stream; ranges are checked at enqueue. Host memory
 * must stay valid until the copy has run. CUDA: cudaMemcpyAsync. */
NPURT_API npuError_t npuMemcpyAsync(void* dst, const void* src, size_t count,
                                    npuMemcpyKind kind, npuStream_t stream);

/* Sets count bytes of device memory to value. CUDA: cudaMemset(Async). */
NPURT_API npuError_t npuMemset(void* devPtr, int value, size_t count);
NPURT_API npuError_t npuMemsetAsync(void* devPtr, int value, size_t count,
                                    npuStream_t stream);

/* Pinned host memory. CUDA: cudaMallocHost / cudaFreeHost. */
NPURT_API npuError_t npuMallocHost(void** ptr, size_t size);
NPURT_API npuError_t npuFreeHost(void* ptr);

/* npuHostRegister flags. CUDA: cudaHostRegisterDefault, cudaHostRegisterMapped. */
#define npuHostRegisterDefault 0x00u
#define npuHostRegisterMapped 0x02u

/* Registers [ptr, ptr+size) as pinned host memory. flags: npuHostRegisterDefault,
 * or npuHostRegisterMapped to also map the range into the current device
 * (Note [Mapped host memory] in csrc/npurt/README.md): copies and memsets may
 * then name it as device memory, device tasks read and write it in place, and
 * npuHostGetDevicePointer gives its device address. Other flags →
 * npuErrorInvalidValue.
 * Memory that is not mapped in the process (any page of the range) →
 * npuErrorInvalidValue, as are size 0 and a range that wraps around.
 * Overlapping an existing registration → npuErrorHostMemoryAlreadyRegistered.
 * CUDA: cudaHostRegister. */
NPURT_API npuError_t npuHostRegister(void* ptr, size_t size, unsigned int flags);

/* [out] *pDevice: the device address of host memory registered with
 * npuHostRegisterMapped; pHost may point anywhere inside the range. The
 * simulated device shares the process's address space, so it is pHost itself.
 * flags must be 0. A pointer outside every mapped registration →
 * npuErrorInvalidValue. CUDA: cudaHostGetDevicePointer. */
NPURT_API npuError_t npuHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags);

/* ptr must be the start of a registered range, else
 * npuErrorHostMemoryNotRegistered. CUDA: cudaHostUnregister. */
NPURT_API npuError_t npuHostUnregister(void* ptr);

typedef enum npuMemoryType {
  npuMemoryTypeUnregistered = 0, /* ordinary (pageable) host memory */
  npuMemoryTypeHost = 1,         /* pinned: npuMallocHost or npuHostRegister */
  npuMemoryTypeDevice = 2
} npuMemoryType;

typedef struct npuPointerAttributes {
  npuMemoryType type;
  int device;        /* device of a device pointer, else -1 */
  void* basePointer; /* start of the allocation/registration, else NULL */
  size_t size;       /* its size, else 0 */
} npuPointerAttributes;

/* [out] attributes of any pointer (unknown pointers are Unregistered).
 * CUDA: cudaPointerGetAttributes. */
NPURT_API npuError_t npuPointerGetAttributes(npuPointerAttributes* attributes,
                                             const void* ptr);

/* ------------------------------------------------------------------------ */
/* Notifications for layers above                                           */
/* ------------------------------------------------------------------------ */

/* Called on the thread that calls npuStreamDestroy, before the handle is
 * invalidated (the stream still accepts work during the call). Must not
 * destroy streams or (un)register callbacks. */
typedef void (*npuStreamDestroyCallback_t)(npuStream_t stream, int device,
                                           void* userData);

/* [out] handle identifies the registration for npuUnregister... */
NPURT_API npuError_t npuRegisterStreamDestroyCallback(
    npuStreamDestroyCallback_t callback, void* userData, uint64_t* handle);
NPURT_API npuError_t npuUnregisterStreamDestroyCallback(uint64_t handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Debug knobs and test hooks: task delays, the trace, fault injection. */
#include "npurt/npurt_debug.h"
/* The device race detector. */
#include "npurt/npurt_racecheck.h"

#endif /* NPURT_NPURT_H_ */
