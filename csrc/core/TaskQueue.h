// The task queue between PyTorch's calling threads and the device.
//
// Layer: framework core.
//
// As in torch_npu, launches (ops, copies, event record/wait) do not call the
// runtime on the calling thread: they are pushed onto a queue, and a consumer
// thread submits them to npurt. The calling thread returns as soon as the
// launch is queued.
//
// Modes (environment, read once; bad values raise at first use):
//  - TASK_QUEUE_ENABLE=1 (default): one queue and one consumer thread per
//    device, shared by all streams of the device; each item names its stream.
//  - TASK_QUEUE_ENABLE=2: as 1, with a busy-polling consumer (lower latency,
//    one core kept busy while work flows).
//  - TASK_QUEUE_ENABLE=0: no queue; launches call npurt on the calling thread.
//  - ASCEND_LAUNCH_BLOCKING=1: no queue, and every launch synchronizes its
//    stream and raises the failure at the launch that caused it (exact
//    errors, slow).
//  - PER_STREAM_QUEUE=1 (only with the queue on): every managed stream gets
//    its own queue and consumer; see the external-stream rules in
//    docs/EXTERNAL_STREAMS.md.
// Sync-launch streams never enqueue: their launches go straight to npurt.
//
// Note [Task queue drain rule]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Anything that hands a stream's work to someone other than the queue — the
// raw handle (NPUStream::stream()), stream/device synchronize, stream query,
// event synchronize — first drains the queue(s) that may hold work for that
// stream: it waits until the consumer has submitted every item pushed before
// the drain began. Items pushed concurrently by other threads after that may
// or may not be included (the usual stream-ordering rule for unsynchronized
// producers). A failure in the consumer (npurt refused an item) becomes the
// failure of the item's stream (Note [Launch failures belong to streams] in
// TaskQueue.cpp): it is reported once, by that stream's synchronize or query
// or its device's synchronize, naming the operator; a push never raises it.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "core/NPUStream.h"
#include "npurt/npurt.h"

namespace c10_npu::queue {

enum class Mode { kDisabled = 0, kEnabled = 1, kBusyPoll = 2 };

struct Config {
  Mode mode = Mode::kEnabled;
  bool launchBlocking = false;  // ASCEND_LAUNCH_BLOCKING=1
  bool perStreamQueue = false;  // PER_STREAM_QUEUE=1 (only if mode != kDisabled)
  bool queued() const { return mode != Mode::kDisabled && !launchBlocking; }
};

// The configuration from the environment. Raises (every time) if a variable
// has a bad value, e.g. "TASK_QUEUE_ENABLE should be 0, 1 or 2". Thread-safe.
const Config& config();

// Launches a task on a stream: through the queue, or directly (see modes).
// Ownership of the task's userData passes to this call in every case: on
// failure the task is released before the exception propagates. Thread-safe;
// many producers may launch onto one stream at once.
void launch(const NPUStream& stream, const npuTask& task);

// Queues an event record / a stream wait on an event, ordered with the
// launches on the stream. recordEvent returns a ticket for submitted():
// 0 when the record reached the runtime already (direct launch). Thread-safe.
uint64_t recordEvent(const NPUStream& stream, npuEvent_t event);
void waitEvent(const NPUStream& stream, npuEvent_t event);

// Queues one launch of an executable graph on `stream` (NPUGraph::replay),
// ordered with the launches on the stream. The caller keeps `exec` alive
// until the item was submitted (waitSubmitted). Thread-safe.
void launchGraph(const NPUStream& stream, npuGraphExec_t exec);

// Destroys a runtime event once every item already pushed to any queue has
// been submitted (records and waits of the event may sit in several queues:
// another device's, or other streams' with PER_STREAM_QUEUE=1). Does not
// block and pushes nothing: see Note [Event destruction by ticket] in
// TaskQueue.cpp. Never raises, as destructors require. Thread-safe.
void destroyEvent(npuEvent_t event) noexcept;

// See Note [Task queue drain rule]. drain() covers the queue `stream` uses
// and raises a launch failure filed under `stream`; drainDevice() covers every
// queue of the device and raises one filed under any of its streams.
// Thread-safe.
void drain(const NPUStream& stream);
void drainDevice(c10::DeviceIndex device);

// As drain() / drainDevice(), without reporting anything: for callers that
// only need the ordering (the allocator, the external-stream destroy
// notification), so that they never take an error that belongs to a stream's
// synchronize. Thread-safe.
void waitSubmitted(const NPUStream& stream);
void waitSubmittedDevice(c10::DeviceIndex device) noexcept;

// While a task's release runs because npurt (or the queue) refused its
// launch, the reason; nullptr otherwise. Lets the release poison the task's
// outputs with the launch error (Note [Poisoned memory]). An empty reason
// means the refusal is raised to the launching caller right away: the
// caller's tensors are unchanged and nothing is to be poisoned. Thread-local.
const std::string* failedLaunchMessage() noexcept;

// True if the item with this ticket (from recordEvent) has been submitted to
// the runtime; lets a query answer "not complete yet" without draining.
// Thread-safe.
bool submitted(const NPUStream& stream, uint64_t ticket);

// True if the queue of `stream` has items not yet submitted. Thread-safe.
bool hasPending(const NPUStream& stream);

// Monotonic token identifying the queue that work for `stream` goes through;
// used by events to know whether a record and a wait share a queue (then FIFO
// order already orders them). Thread-safe.
const void* queueIdentity(const NPUStream& stream);

}  // namespace c10_npu::queue
