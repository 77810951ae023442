// NPU graphs at the PyTorch level: torch_npu's NPUGraph (CUDA's CUDAGraph),
// task groups and super-kernel scopes.
//
// Layer: framework core (csrc/core/graphs). Built on npurt's stream capture
// (Note [Stream capture], Note [Graph launch] in csrc/npurt/README.md).
//
// Note [Why capture and replay live in the framework]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// npurt records and replays tasks; it knows nothing of tensors, generators or
// the task queue. Three things make a captured PyTorch program replay
// correctly, and all three are the framework's:
//  - memory: tensors allocated during the capture come from a private pool of
//    the caching allocator, and go back to it when freed during the capture,
//    so no later eager allocation can take memory a replay writes; the graph
//    holds the pool until reset() or destruction (Note [Private memory pools]
//    in csrc/core/NPUBlockPool.h);
//  - random numbers: captured random ops draw from a per-replay offset (Note
//    [Random numbers of captured ops] in csrc/core/NPUGenerator.h);
//  - order: captures begin and end in order with the launches in the task
//    queue (Note [Capture is visible at enqueue] in CaptureRegistry.h), and a
//    replay is itself a queued launch.
// How the op path's tasks run again at every replay, and what a failing replay
// leaves behind, is Note [Replayed op tasks] in csrc/aten/OpLauncher.h.
#pragma once

#include <c10/core/Allocator.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.h"

namespace at {
class Tensor;
}

namespace c10_npu {

// Note [The currently capturing graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// get_currently_capturing_graph() answers "which NPUGraph does the current
// stream record into?" (CUDA's CUDAGraph::get_currently_capturing_graph), for
// code that reaches the graph from inside a capture. npurt knows the stream's
// capture id; the capture registry maps the ids of captures begun by an
// NPUGraph to the instance, from capture_begin until capture_end or reset,
// which unregister it before the instance can go away. So a stream forked
// into the capture (it waited on an event recorded in it) finds the graph
// too, and a stream capturing for no NPUGraph (npuStreamBeginCapture called
// directly) finds none. Rules, as torch_npu's:
//  - only an active capture counts: an invalidated one (a host sync inside
//    it) is "not currently capturing";
//  - in compat mode an external current stream is "not currently capturing"
//    (torch_npu never asks the runtime about one); in full mode it is asked
//    like any stream (Note [External stream modes] in ExternalStreams.h);
//  - the NPUGraph inside a torch.accelerator.Graph is never handed to Python
//    (get_currently_capturing_npu_graph refuses it): Python has no object
//    for it.
// The pointer stays valid until that capture ends: as with CUDA, the caller
// must not end, reset or destroy the graph on another thread meanwhile.

// torch_npu.npu.NPUGraph. One instance captures once; replay() launches the
// captured work on the current stream. Not thread-safe: one thread uses an
// instance at a time (as CUDAGraph).
class NPUGraph {
 public:
  // Who created the instance: torch_npu.npu.NPUGraph (Python holds it) or
  // torch.accelerator.Graph (GraphImpl.cpp; Python never sees it).
  enum class Owner { kNPUGraph, kAcceleratorGraph };

  explicit NPUGraph(Owner owner = Owner::kNPUGraph) : owner_(owner) {}
  // reset(): returns the pool and destroys the graph; never raises.
  ~NPUGraph();
  NPUGraph(const NPUGraph&) = delete;
  NPUGraph& operator=(const NPUGraph&) = delete;

  // Begins capturing on the current stream, allocating from `pool` (a
  // graph_pool_handle() or another graph's pool(); {0, 0}: a new pool).
  // Raises torch_npu's messages for TASK_QUEUE_ENABLE=2, a second capture,
  // an external stream (compat mode) and the default stream.
  void capture_begin(c10::MempoolId_t pool = {0, 0},
                     npuStreamCaptureMode mode = npuStreamCaptureModeGlobal);
  // Ends the capture (on the stream it began on) and instantiates the graph.
  // A capture that failed (a host sync inside it, an unjoined fork, ...)
  // raises here with npurt's reason; the instance can then capture again.
  void capture_end();
  // Queues one run of the graph on the current stream of its device.
  void replay();
  // Destroys the graph and returns the memory pool. Waits until replays
  // already queued were handed to the runtime (they still run). Never raises.
  void reset() noexcept;
  // The pool id; raises before a successful capture began.
  c10::MempoolId_t pool() const;
  // Kept for torch_npu's API: the graph is always kept for debug_dump.
  void enable_debug_mode() noexcept { debugMode_ = true; }
  // Writes the graph as Graphviz DOT to `path` (warns without a graph).
  void debug_dump(const std::string& path);

  // Conditional nodes (Note [Conditional nodes in NPU graphs]), as CUDAGraph's.
  // Between capture_begin and capture_end, on the stream that records into
  // the innermost open capture of this graph: adds an if node reading
  // `pred` (a one-element bool npu tensor of the capture's device, kept
  // alive by the graph) and makes a body stream current, whose work until
  // end_capture_to_conditional_node() runs at a replay only when `pred`
  // holds true at that point of the replay. Raises torch_npu's messages.
  void begin_capture_to_if_node(const at::Tensor& pred);
  // Ends the innermost body and restores the stream current before it.
  // Raises when the body's capture failed (the graph's capture then fails
  // too).
  void end_capture_to_conditional_node();

  // True after a successful capture_end(), until reset().
  bool has_graph_exec() const noexcept { return hasGraphExec_; }

  // The capture/graph state task-group handles refer to; null before capture.
  std::shared_ptr<graphs::CaptureState> state() const { return capture_; }

  // The NPUGraph whose capture the current stream records into (Note [The
  // currently capturing graph]). Raises torch_npu's messages when the current
  // stream is not capturing, or captures for no NPUGraph. Thread-safe.
  static NPUGraph* get_currently_capturing_graph();
  // As get_currently_capturing_graph, and also refuses the graph of a
  // torch.accelerator.Graph capture (torch_npu's Python API). Thread-safe.
  static NPUGraph* get_currently_capturing_npu_graph();

 private:
  void endCaptureOnError() noexcept;
  // Ends the open conditional bodies (reset mid-capture); never raises.
  void endConditionalBodies() noexcept;
  // Drops the predicates the graph's if nodes read.
  void releaseConditions() noexcept;
  void queueRngState(const NPUStream& stream);

  const Owner owner_;
  std::shared_ptr<graphs::CaptureState> capture_;
  std::optional<NPUStream> captureStream_;
  c10::DeviceIndex device_ = -1;
  c10::MempoolId_t mempoolId_{0, 0};
  bool capturing_ = false;
  bool hasGraphExec_ = false;
  bool debugMode_ = false;
  npuGraph_t graph_ = nullptr;
  npuGraphExec_t exec_ = nullptr;
  // Replays with random ops must not overlap a previous replay on another
  // stream (Note [Random numbers of captured ops]): the last replay's stream
  // and an event recorded after it.
  std::optional<NPUStream> lastReplayStream_;
  std::unique_ptr<NPUEvent> lastReplayDone_;
  // The conditional bodies being captured, innermost last: the body stream,
  // the stream current before it, the body's npurt capture id.
  struct ConditionalBody {
    NPUStream stream;
    NPUStream previous;
    uint64_t captureId;
  };
  std::vector<ConditionalBody> conditionalBodies_;
};

// torch.npu.graph_pool_handle(): a new pool id {n, 0} for sharing between
// graphs. Thread-safe.
c10::MempoolId_t graphPoolHandle();

// torch.npu.is_current_stream_capturing(). Thread-safe.
bool isCurrentStreamCapturing();

// A task group recorded by graph_task_group_end.
struct TaskGroupHandle {
  std::shared_ptr<graphs::CaptureState> graph;
  npuTaskGroup_t group = 0;
};

// graph_task_group_begin/end (inside a capture), graph_task_update_begin/end
// (after it; Note [Task-group updates] in NPUGraph.cpp). Thread-safe; raise
// torch_npu's refusal for external streams in compat mode.
void graphTaskGroupBegin(const NPUStream& stream);
TaskGroupHandle graphTaskGroupEnd(const NPUStream& stream);
void graphTaskUpdateBegin(const NPUStream& stream, const TaskGroupHandle& handle);
void graphTaskUpdateEnd(const NPUStream& stream);

// super_kernel_scope_begin/end on the current stream: inside a capture the
// nodes between them become one fused node; outside a capture they do
// nothing. `name` may be null. Thread-safe.
void superKernelScopeBegin(const char* name);
void superKernelScopeEnd(const char* name);

}  // namespace c10_npu
