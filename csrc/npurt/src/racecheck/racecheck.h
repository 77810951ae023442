// The device race detector: hooks called by the runtime's entry points and
// executors while NPU_SIM_RACECHECK (npuRaceCheckSetMode) is on. Public API:
// include/npurt/npurt_racecheck.h; user guide: docs/DEBUGGING.md.
//
// Note [Happens-before model]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Two tasks race when they access overlapping device memory, at least one
// writes, and nothing orders one after the other. "Ordered" is the
// happens-before relation of the stream model, tracked with vector clocks
// (one entry per stream, vector_clock.h):
//  - stream order: a task is ordered after every earlier task of its stream.
//    A stream's own entry counts its finished work tasks; a task's epoch is
//    that count when it starts, and the count passes it when it finishes.
//  - events: a record stores its stream's clock in the event version; a wait
//    joins the version's clock into its stream's clock when it has waited.
//    A deferred version (npuEventRecordDeferred) takes the clock of whoever
//    completes it: the stream of the task that calls npuEventCompleteDeferred
//    (the task included), or the host.
//  - the host: one host clock for all host threads (they synchronize among
//    themselves in ways npurt cannot see, e.g. the framework's task queue, so
//    treating them as one never invents a race). A synchronize that returns
//    (stream, event, device) or a query that reports completion joins the
//    clock of what it waited for into the host clock; a wait on a version
//    that is already complete when issued does the same (the host saw it
//    complete). Every launch carries the host clock of its enqueue, and its
//    stream joins it before the task starts: work launched after a
//    synchronize is ordered after the work synchronized with.
// Graph launches need nothing more: a launch enqueues its nodes on lanes
// with event records and waits (Note [Graph launch]), which the rules above
// order, replay after replay. Host functions are tasks like any other.
//
// Checks happen on the executor, when a task is about to run, in the order
// tasks actually start. That order agrees with happens-before (a task starts
// after everything it is ordered after finished), so the history
// (shadow_memory.h: per byte range, the last writer and the reads since)
// always holds the accesses a new task must be ordered after; a deferred
// version completed by a task enqueued after its waiter is handled for the
// same reason. A task's accesses are its declared ranges
// (npuTaskDeclareAccesses, taken at launch or capture) and those of copies
// and memsets (device sides only).
//
// Memory reuse: npuMalloc and npuRaceCheckResetRange forget the history of
// a range, because whoever hands memory out again (npurt itself, or the
// framework's caching allocator with its own stream and event logic) has
// ordered the new owner after the old one; without that, a block freed by
// one stream and reused by another would look like a race.
//
// What it does not see: host reads and writes of device memory (npuMemcpy,
// pointers dereferenced on the host), accesses nobody declared, and host
// threads that race each other.
//
// Thread safety: every function is thread-safe (one mutex guards the
// checker's state; it is only taken while the detector is on).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "../task.h"
#include "npurt/npurt.h"
#include "shadow_memory.h"
#include "vector_clock.h"

namespace npurt::internal {
class Stream;
class EventVersion;
}  // namespace npurt::internal

namespace npurt::internal::racecheck {

// The mode (an npuRaceCheckMode). Relaxed: a switch is not ordered with the
// work around it (see npuRaceCheckSetMode).
extern std::atomic<int> gMode;

// Hot path: one relaxed load and a predictable branch when the detector is off.
inline bool enabled() noexcept { return gMode.load(std::memory_order_relaxed) != npuRaceCheckOff; }

// Switches the mode (caller validated it); turning it on clears the history.
void setMode(npuRaceCheckMode mode);

// --- Launch side ---
// Enqueues `task` on `stream` together with what the check needs (the host
// clock, the accesses declared for its userData). Returns the ticket.
// Throws std::bad_alloc (nothing enqueued then).
uint64_t submit(Stream& stream, const InlineTask& task);
// npuTaskDeclareAccesses / what a launch or capture consumes.
void declare(const void* userData, AccessList accesses);
AccessList takeDeclared(const void* userData);
// Converts the C declaration, keeping device memory only.
AccessList deviceAccesses(const npuMemAccess* accesses, size_t count);

// --- Executor side (the stream's owner) ---
// Before a work or control task runs: checks its accesses. Returns false if
// it races and the mode is npuRaceCheckError; errorBuf then says why and the
// task must fail with it instead of running.
bool beforeTask(Stream& stream, const InlineTask& task, char* errorBuf,
                size_t errorBufSize) noexcept;
// After it ran (or failed instead): its epoch is finished.
void afterTask(Stream& stream) noexcept;
// A task discarded without running (Note [Task failure rule]).
void discardTask(Stream& stream) noexcept;
// A record task completes `version`; before the version is published.
void onRecord(Stream& stream, EventVersion& version) noexcept;
// A wait task at the head of `stream` found `version` complete.
void onWait(Stream& stream, const EventVersion& version) noexcept;
// npuEventCompleteDeferred, before the version is published.
void onDeferredComplete(EventVersion& version) noexcept;

// --- Host side ---
void hostSawStream(const Stream& stream) noexcept;
void hostSawVersion(const EventVersion& version) noexcept;
void hostSawDevice(int device) noexcept;
// npuMalloc, npuRaceCheckResetRange.
void resetRange(const void* ptr, size_t bytes) noexcept;

// Reports so far, and the latest one.
uint64_t reportCount() noexcept;
std::string lastReport();

}  // namespace npurt::internal::racecheck
