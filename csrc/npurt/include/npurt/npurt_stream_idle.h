/*
 * npurt — whether a stream has finished its work, asked without reporting
 * anything: for memory allocators above npurt that decide whether a freed
 * block needs an event (Note [Frees need no event on finished streams] in
 * csrc/core/NPUCachingAllocator.cpp). Include it beside npurt/npurt.h (which
 * it includes). The conventions of npurt.h apply (statuses, last error
 * message, thread safety).
 */
#ifndef NPURT_NPURT_STREAM_IDLE_H_
#define NPURT_NPURT_STREAM_IDLE_H_

#include "npurt/npurt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [out] *idle = 1 if nothing is queued or running on the stream, it holds no
 * unreported task failure and it is not capturing; 0 otherwise. Unlike
 * npuStreamQuery it never reports or clears a failure and does not refuse a
 * capturing stream, so a caller that only needs "has all work enqueued so far
 * finished?" cannot take an error that belongs to the stream's synchronize.
 * A stream seen idle has the effects of its finished tasks visible to the
 * caller. Thread-safe. npuErrorInvalidValue for a NULL idle,
 * npuErrorInvalidResourceHandle for a bad stream.
 * No CUDA equivalent (cudaStreamQuery reports errors). */
NPURT_API npuError_t npuStreamIsIdle(npuStream_t stream, int* idle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPURT_NPURT_STREAM_IDLE_H_ */
