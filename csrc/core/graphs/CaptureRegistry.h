// What the framework knows about graph captures in progress: which capture a
// stream records into, the random-number state of each capture, the device
// memory a graph writes, and the streams whose launches are being collected
// for a task-group update.
//
// Layer: framework core (csrc/core/graphs). The runtime keeps the captures
// themselves (Note [Stream capture] in csrc/npurt/README.md); this registry
// maps npurt's capture ids to the NPUGraph that began them, so that the op
// path, the allocator and the generators can ask "is this stream capturing,
// and for whom?" on the calling thread, at enqueue.
//
// Note [Capture is visible at enqueue]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Launches reach npurt through the task queue, later, on the consumer thread
// (csrc/core/TaskQueue.h). A launch decides at *enqueue* how it behaves under
// capture (a replayable task, a per-replay random seed, memory from the
// graph's pool), so the host thread must see the capture state the launch
// will meet in npurt. The rules that make the two agree:
//  - capture begin and end, task-group and fused-scope markers first wait
//    until every queued item was submitted, then call npurt on the calling
//    thread: items pushed before them are submitted before, items pushed
//    after them after (the queue is FIFO per device);
//  - while a capture is active, an event wait pushed to the queue is waited
//    for until submitted, so that a stream forked into the capture (a wait on
//    an event recorded in it) is capturing in npurt before the next op on it
//    is enqueued.
// Outside captures this costs one relaxed load per launch (anyCapture()).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/NPUGenerator.h"
#include "core/NPUStream.h"
#include "core/PoisonedMemory.h"
#include "npurt/npurt.h"

namespace c10_npu {
class NPUGraph;
}

namespace c10_npu::graphs {

// One capture and, after it ended, its graph: shared by the NPUGraph, the
// registry (while capturing) and task-group handles.
struct CaptureState {
  struct Rng {
    at::Generator generator;                // the generator the capture drew from
    std::shared_ptr<GraphRngState> state;   // read by the captured tasks at every replay
    uint64_t increment = 0;                 // sub-sequences reserved during the capture
  };

  uint64_t captureId = 0;  // npurt's capture id; 0 once the capture ended
  c10::DeviceIndex device = 0;
  // The NPUGraph that began the capture; read only through capturingGraph(),
  // under the registry's lock (Note [The currently capturing graph]).
  NPUGraph* graph = nullptr;

  std::mutex mutex;                          // guards everything below
  std::vector<poison::StorageRef> writes;    // memory the captured tasks write
  std::vector<Rng> rngs;                     // one per generator drawn from
  std::vector<c10::Storage> conditions;      // read by the graph's if nodes
  npuGraphExec_t exec = nullptr;             // after a successful capture

  // Reserves one sub-sequence of `generator` for a captured task: its offset
  // within a replay, and the state it resolves against. Thread-safe.
  SeedReservation reserve(const at::Generator& generator);
  // The offset the next reserve(generator) returns: the generator's
  // position within the capture (Note [Generator state during capture] in
  // NPUGenerator.cpp). Thread-safe.
  uint64_t offsetOf(const at::Generator& generator);
  // Moves that position, as set_state does during a capture; the replay
  // advances the generator by the position at the capture's end.
  // Thread-safe.
  void setOffset(const at::Generator& generator, uint64_t offset);
  // Records that a captured task writes `storage`. Thread-safe.
  void noteWrite(const poison::StorageRef& storage);

 private:
  // The entry of `generator`, made (at position 0) on first use. Caller
  // holds `mutex`.
  Rng& rngOfLocked(const at::Generator& generator);
};

// True while any capture made through NPUGraph is in progress or any stream
// collects a task-group update. One relaxed load. Thread-safe.
bool anyCapture() noexcept;

// Registers / unregisters a capture under an npurt capture id: its own, or
// that of a conditional body captured for it (Note [Conditional nodes in NPU
// graphs] in ConditionalNodes.cpp). Thread-safe.
void registerCapture(uint64_t captureId, const std::shared_ptr<CaptureState>& capture);
void unregisterCapture(uint64_t captureId) noexcept;

// The capture `stream` records into (a capture begun by NPUGraph, joined or
// not), or the state a task-group update on `stream` collects for; nullptr if
// neither. Cheap when nothing captures. Thread-safe.
std::shared_ptr<CaptureState> recorderOf(const NPUStream& stream);

// The NPUGraph whose capture has npurt capture id `captureId`, or nullptr if
// no capture in progress has that id (a capture begun outside NPUGraph, or one
// that already ended). Thread-safe; see Note [The currently capturing graph]
// for how long the pointer stays valid.
NPUGraph* capturingGraph(uint64_t captureId);

// npurt's view: whether the stream is capturing (active or invalidated).
// Does not drain. Thread-safe.
bool isCapturing(const NPUStream& stream);

// Task-group updates (Note [Task-group updates] in NPUGraph.cpp): while a
// stream is between beginUpdate and endUpdate, launches on it are handed to
// collect() instead of the runtime. All thread-safe.
void beginUpdate(const NPUStream& stream, std::shared_ptr<CaptureState> graph,
                 npuTaskGroup_t group);
// Takes the task if `stream` collects for an update (returns true), else
// leaves it alone (false). Owns the task when it returns true.
bool collect(const NPUStream& stream, const npuTask& task);
// Ends the update and gives the collected tasks to the group's exec. Raises
// (releasing the collected tasks) when the update does not match the group.
void endUpdate(const NPUStream& stream);

}  // namespace c10_npu::graphs
