/*
 * ACL-compatible runtime API of the simulated NPU: devices, streams, events,
 * memory and callbacks, with ACL's names, types, enum values and status codes
 * over npurt (csrc/npurt). docs/ACL.md lists what exists and where the
 * simulated device differs from an Ascend NPU.
 *
 * Handles: an aclrtStream is an npuStream_t and an aclrtEvent an npuEvent_t
 * (the same 64-bit value), so ACL code and npurt code share them freely, and
 * torch_npu.npu.ExternalStream(stream) / c10_npu::getStreamFromExternal wrap
 * an aclrtStream. A NULL stream means the device's default ACL stream (made
 * on first use, one per device, never destroyed; it is not PyTorch's default
 * stream). Garbage or destroyed handles return ACL_ERROR_RT_INVALID_HANDLE.
 *
 * Statuses: checks of the arguments made here return ACL_ERROR_INVALID_PARAM;
 * a refusal of npurt is mapped (docs/ACL.md, "Status codes"), and
 * aclGetRecentErrMsg() gives its message. No function throws or aborts.
 *
 * Thread safety: every function may be called from any number of host
 * threads at once. The current device is per host thread (aclrtSetDevice).
 */
#ifndef ACL_ACL_RT_H_
#define ACL_ACL_RT_H_

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclrtRunMode { ACL_DEVICE = 0, ACL_HOST = 1 } aclrtRunMode;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4 /* direction inferred from the pointers */
} aclrtMemcpyKind;

/* Page policies of aclrtMalloc: the simulated device has one kind of page,
 * so every policy allocates the same way (the value is checked). */
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
} aclrtMemMallocPolicy;

/* Memory kinds of aclrtGetMemInfo. The simulated device's memory is its
 * HBM (capacity NPU_SIM_MEMORY_MB); it has no DDR (free = total = 0). */
typedef enum aclrtMemAttr {
  ACL_DDR_MEM = 0,
  ACL_HBM_MEM = 1,
  ACL_DDR_MEM_HUGE = 2,
  ACL_DDR_MEM_NORMAL = 3,
  ACL_HBM_MEM_HUGE = 4,
  ACL_HBM_MEM_NORMAL = 5,
  ACL_DDR_MEM_P2P_HUGE = 6,
  ACL_DDR_MEM_P2P_NORMAL = 7,
  ACL_HBM_MEM_P2P_HUGE = 8,
  ACL_HBM_MEM_P2P_NORMAL = 9,
  ACL_HBM_MEM_HUGE1G = 10,
  ACL_HBM_MEM_P2P_HUGE1G = 11
} aclrtMemAttr;

/* Virtual memory (aclrtReserveMemAddress & co.): docs/ACL.md, "Virtual
 * memory". Physical memory is an aclrtDrvMemHandle (an npurt
 * npuMemGenericAllocationHandle_t, the same 64-bit value). */
typedef void* aclrtDrvMemHandle;

typedef enum aclrtMemHandleType { ACL_MEM_HANDLE_TYPE_NONE = 0 } aclrtMemHandleType;

typedef enum aclrtMemAllocationType { ACL_MEM_ALLOCATION_TYPE_PINNED = 0 } aclrtMemAllocationType;

typedef enum aclrtMemLocationType {
  ACL_MEM_LOCATION_TYPE_HOST = 0, /* not supported (as on CANN) */
  ACL_MEM_LOCATION_TYPE_DEVICE = 1
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id; /* device */
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef struct aclrtPhysicalMemProp {
  aclrtMemHandleType handleType;         /* ACL_MEM_HANDLE_TYPE_NONE */
  aclrtMemAllocationType allocationType; /* ACL_MEM_ALLOCATION_TYPE_PINNED */
  aclrtMemAttr memAttr;  /* an HBM kind; every kind has 2 MiB pages here */
  aclrtMemLocation location;
  uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
  ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
  ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF
} aclrtMemGranularityOptions;

typedef enum aclrtStreamStatus {
  ACL_STREAM_STATUS_COMPLETE = 0,
  ACL_STREAM_STATUS_NOT_READY = 1,
  ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

typedef enum aclrtEventRecordedStatus {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0, /* not recorded, or not complete */
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum aclrtCallbackBlockType {
  ACL_CALLBACK_NO_BLOCK = 0, /* the stream goes on while the callback runs */
  ACL_CALLBACK_BLOCK = 1     /* later work of the stream waits for it */
} aclrtCallbackBlockType;

/* Event flags of aclrtCreateEventWithFlag. ACL_EVENT_TIME_LINE enables
 * aclrtEventElapsedTime; ACL_EVENT_SYNC and ACL_EVENT_CAPTURE_STREAM_PROGRESS
 * are accepted (every event of the simulated device can do both). */
#define ACL_EVENT_SYNC 0x00000001u
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002u
#define ACL_EVENT_TIME_LINE 0x00000008u

/* Stream flags of aclrtCreateStreamWithConfig: accepted, no effect on the
 * simulated device (other bits: ACL_ERROR_INVALID_PARAM). */
#define ACL_STREAM_FAST_LAUNCH 0x00000001u
#define ACL_STREAM_FAST_SYNC 0x00000002u
#define ACL_STREAM_PERSISTENT 0x00000004u
#define ACL_STREAM_HUGE 0x00000008u

typedef void (*aclrtCallback)(void* userData);
typedef void (*aclrtHostFunc)(void* args);

/* --- Devices ------------------------------------------------------------- */

/* Makes deviceId the calling thread's current device. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
/* [out] deviceId: the calling thread's current device (0 until set). */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId);
/* [out] count: NPU_SIM_DEVICE_COUNT. */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count);

/* Device utilization, CANN's layout. The simulated device has one kind of
 * core: cubeUtilization and vectorUtilization are both npurt's
 * npuDeviceGetUtilization (its cores' busy share over the last second);
 * aicpuUtilization and memoryUtilization are -1 (not supported).
 * utilizationExtend must be NULL. */
typedef struct aclrtUtilizationExtendInfo aclrtUtilizationExtendInfo;
typedef struct aclrtUtilizationInfo {
  int32_t cubeUtilization;
  int32_t vectorUtilization;
  int32_t aicpuUtilization;
  int32_t memoryUtilization;
  aclrtUtilizationExtendInfo* utilizationExtend;
} aclrtUtilizationInfo;
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceUtilizationRate(int32_t deviceId,
                                                           aclrtUtilizationInfo* utilizationInfo);
/* Waits for the device's work, then returns. Unlike an Ascend NPU, streams,
 * events and memory of the device stay valid (they may belong to PyTorch in
 * the same process). */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
/* Blocks until the work queued on every stream of the current device before
 * the call has finished; reports a task failure. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
/* Op execution timeout in seconds (0: none): a task that runs longer fails
 * its stream (npuSetOpExecuteTimeout, Note [Op execution timeout]). */
ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOut(uint32_t timeout);
/* The same in microseconds; [out] actualTimeout (may be NULL): the timeout in
 * force, timeout itself (the simulator has no granularity to round to). */
ACL_FUNC_VISIBILITY aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t* actualTimeout);
/* The chip model the devices simulate (NPU_SIM_SOC_VERSION, e.g.
 * "Ascend910B1"), or NULL when they simulate none (the default) or the runtime
 * cannot start; CANN returns NULL when it cannot tell either. The string lives
 * as long as the process. Thread-safe. */
ACL_FUNC_VISIBILITY const char* aclrtGetSocName(void);
/* [out] runMode: always ACL_HOST (the program runs on the host). */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode* runMode);

/* --- Streams ------------------------------------------------------------- */

/* [out] stream: a new stream on the current device. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream);
/* As aclrtCreateStream; priority in [0, 7] (checked; the simulated device
 * runs every ACL stream at its normal priority), flag a combination of
 * ACL_STREAM_* bits. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority,
                                                         uint32_t flag);
/* Destroys the stream; work already queued still runs. NULL (the default
 * stream) cannot be destroyed: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
/* Blocks until the work queued on the stream before the call has finished;
 * a failed task gives ACL_ERROR_RT_AICORE_EXCEPTION (once). */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/* As aclrtSynchronizeStream, giving up after timeout ms with
 * ACL_ERROR_RT_STREAM_SYNC_TIMEOUT; -1 waits forever, other negative values
 * are ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/* [out] status: COMPLETE when nothing is queued or running on the stream. */
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status);
/* Work queued on stream after the call waits for the event's latest record
 * (a never-recorded event: no wait). */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

/* --- Events -------------------------------------------------------------- */

/* [out] event with timing enabled. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event);
/* [out] event; flag a combination of ACL_EVENT_* bits (at least one). */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag);
/* Records the event on the stream: it completes when the work queued on the
 * stream before it has finished. */
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
/* [out] status: COMPLETE if the latest record has completed; NOT_READY if
 * it has not, or if the event was never recorded. */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus* status);
/* Blocks until the latest record has completed (never recorded: returns). */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
/* [out] ms between the completions of start and end, both complete and made
 * with timing (else ACL_ERROR_RT_EVENT_NOT_COMPLETE /
 * ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID). */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent start, aclrtEvent end);
/* Destroys the event; records and waits already queued still resolve. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);

/* --- Memory -------------------------------------------------------------- */

/* [out] devPtr: size bytes (> 0) of device memory on the current device. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
/* As aclrtMalloc (ACL pads to 32 bytes only without this variant; the
 * simulator never pads). */
ACL_FUNC_VISIBILITY aclError aclrtMallocAlign32(void** devPtr, size_t size,
                                                aclrtMemMallocPolicy policy);
/* Frees aclrtMalloc memory; copies already queued on it still complete. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr);
/* [out] hostPtr: size bytes (> 0) of pinned host memory. */
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr);

typedef enum aclrtHostRegisterType {
  ACL_HOST_REGISTER_MAPPED = 0,      /* host memory the device reads and writes */
  ACL_HOST_REGISTER_IOMEMORY = 0x04, /* a PCIe device's IO space: not simulated */
  ACL_HOST_REGISTER_READONLY = 0x08  /* reserved by CANN: not supported */
} aclrtHostRegisterType;
/* Registers [ptr, ptr + size) of host memory as memory the current device
 * reads and writes in place (npurt's npuHostRegisterMapped, Note [Mapped host
 * memory]); [out] devPtr: its device address (the host address: one address
 * space). Only ACL_HOST_REGISTER_MAPPED (the other types →
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT, any other value → ACL_ERROR_INVALID_PARAM);
 * unmapped or already registered memory fails as npurt does. */
ACL_FUNC_VISIBILITY aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type,
                                               void** devPtr);
/* Ends a registration; ptr is the start of the range. */
ACL_FUNC_VISIBILITY aclError aclrtHostUnregister(void* ptr);
/* Copies count bytes (count <= destMax, else ACL_ERROR_INVALID_PARAM) on the
 * calling thread; device ranges are checked. Waits for no stream. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind);
/* As aclrtMemcpy, queued on the stream; host memory must stay valid until
 * the copy has run. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream);
/* Sets count bytes (count <= maxCount) of device memory to (uint8_t)value. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream);
/* [out] free, total bytes of the current device (see aclrtMemAttr). */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total);

/* --- Virtual memory (docs/ACL.md, "Virtual memory") --------------------- */

/* [out] granularity (2 MiB) of memory with the properties prop: the unit of
 * the sizes, addresses and offsets below. */
ACL_FUNC_VISIBILITY aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                              aclrtMemGranularityOptions option,
                                                              size_t* granularity);
/* [out] virPtr: size bytes of addresses holding no memory; alignment 0 or a
 * power of two multiple of the granularity; expectPtr a hint (may be NULL);
 * flags 0 or 1 (CANN's page kinds; one kind here). */
ACL_FUNC_VISIBILITY aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                                    void* expectPtr, uint64_t flags);
/* Gives back a whole reservation of aclrtReserveMemAddress; it must have no
 * mapping left. */
ACL_FUNC_VISIBILITY aclError aclrtReleaseMemAddress(void* virPtr);
/* [out] handle: size bytes (a multiple of the granularity) of physical
 * memory on device prop->location.id, counted against its capacity
 * (ACL_ERROR_RT_MEMORY_ALLOCATION past it). flags must be 0. */
ACL_FUNC_VISIBILITY aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                                                 const aclrtPhysicalMemProp* prop, uint64_t flags);
/* Frees physical memory; memory still mapped stays usable until unmapped. */
ACL_FUNC_VISIBILITY aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
/* Maps [offset, offset + size) of handle's memory at virPtr, inside one
 * reservation and over no mapping. flags must be 0. */
ACL_FUNC_VISIBILITY aclError aclrtMapMem(void* virPtr, size_t size, size_t offset,
                                         aclrtDrvMemHandle handle, uint64_t flags);
/* Unmaps the mapping that starts at virPtr. It does not wait for the
 * device: synchronize the work that uses it first. */
ACL_FUNC_VISIBILITY aclError aclrtUnmapMem(void* virPtr);

/* --- Callbacks (docs/ACL.md, "Callbacks") -------------------------------- */

/* Makes the thread threadId (a pthread_t) run the callbacks launched on
 * stream; a stream has at most one such thread (ACL_ERROR_RT_STREAM_SUBSCRIBE
 * if it already has one). */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
/* Ends the subscription. Callbacks of the stream already handed to the
 * thread and not processed yet run on the calling thread before it returns;
 * later ones run on a device executor. */
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);
/* Queues fn(userData) on the subscribed stream (ACL_ERROR_RT_STREAM_NO_CB_REG
 * without a subscription): when the stream reaches it, it is handed to the
 * subscribed thread, which runs it in aclrtProcessReport. With
 * ACL_CALLBACK_BLOCK the stream's later work waits until fn returned. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void* userData,
                                                 aclrtCallbackBlockType blockType,
                                                 aclrtStream stream);
/* Runs one callback handed to the calling thread, waiting up to timeout ms
 * for one (-1: forever); ACL_ERROR_RT_REPORT_TIMEOUT if none came,
 * ACL_ERROR_RT_THREAD_SUBSCRIBE if the thread subscribes no stream. */
ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout);
/* Queues fn(args) on the stream; a device executor runs it when the stream
 * reaches it, and the stream's later work waits for it. No subscription. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_RT_H_ */
