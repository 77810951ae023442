// Task groups, task-group updates and super-kernel scopes of NPU graphs; see
// NPUGraph.h.
//
// Note [Task-group updates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// graph_task_group_begin/end(stream) inside a capture name the nodes the
// stream records between them (npuStreamBeginTaskGroup/EndTaskGroup); the
// handle remembers the graph. After the capture, the ops issued on a stream
// between graph_task_update_begin(stream, handle) and
// graph_task_update_end(stream) are not run: the task queue hands their tasks
// to the registry (graphs::collect) instead of the runtime, and
// graph_task_update_end gives them to npuGraphExecUpdateTaskGroup, which
// swaps them in for the group's nodes, same count and kinds, for every replay
// issued afterwards. Before the swap, update_end waits until every queued item
// of the device was handed to the runtime, so a replay queued before the
// update runs the old tasks and one queued after it the new ones, as the
// program's order says. The new tasks are op tasks built like captured ones
// (they run once per replay, are released with the exec, and take their
// memory from the graph's pool). A mismatch (other ops, another count) is an
// error naming both counts; the graph keeps its old tasks.
#include <c10/util/Exception.h>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/NPUGraph.h"

namespace c10_npu {

void graphTaskGroupBegin(const NPUStream& stream) {
  external::checkManagedOnly(stream, "graph_task_group_begin");
  queue::waitSubmittedDevice(stream.device_index());  // Note [Capture is visible at enqueue]
  NPU_CHECK(npuStreamBeginTaskGroup(stream.rawHandle()));
}

TaskGroupHandle graphTaskGroupEnd(const NPUStream& stream) {
  external::checkManagedOnly(stream, "graph_task_group_end");
  queue::waitSubmittedDevice(stream.device_index());
  npuTaskGroup_t group = 0;
  NPU_CHECK(npuStreamEndTaskGroup(stream.rawHandle(), &group));
  auto graph = graphs::recorderOf(stream);
  TORCH_CHECK(graph != nullptr,
              "graph_task_group_end: the stream does not record into an NPUGraph capture "
              "(capture with torch.npu.graph or NPUGraph.capture_begin).",
              NPU_ERROR_SUFFIX);
  return TaskGroupHandle{std::move(graph), group};
}

void graphTaskUpdateBegin(const NPUStream& stream, const TaskGroupHandle& handle) {
  external::checkManagedOnly(stream, "graph_task_update_begin");
  TORCH_CHECK(handle.graph != nullptr && handle.group != 0,
              "graph_task_update_begin: expected a handle returned by graph_task_group_end.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(!graphs::isCapturing(stream),
              "graph_task_update_begin: the stream is capturing; update a task group after "
              "its capture ended, on a stream that does not capture.",
              NPU_ERROR_SUFFIX);
  graphs::beginUpdate(stream, handle.graph, handle.group);
}

void graphTaskUpdateEnd(const NPUStream& stream) {
  external::checkManagedOnly(stream, "graph_task_update_end");
  queue::waitSubmittedDevice(stream.device_index());  // see the note
  graphs::endUpdate(stream);
}

void superKernelScopeBegin(const char* name) {
  const NPUStream stream = getCurrentNPUStream();
  external::checkManagedOnly(stream, "super_kernel_scope_begin");
  if (!graphs::isCapturing(stream)) return;  // a scope only groups captured work
  queue::waitSubmittedDevice(stream.device_index());
  NPU_CHECK(npuStreamBeginFusedScope(stream.rawHandle(), name));
}

void superKernelScopeEnd(const char* /*name*/) {
  const NPUStream stream = getCurrentNPUStream();
  external::checkManagedOnly(stream, "super_kernel_scope_end");
  if (!graphs::isCapturing(stream)) return;
  queue::waitSubmittedDevice(stream.device_index());
  NPU_CHECK(npuStreamEndFusedScope(stream.rawHandle()));
}

}  // namespace c10_npu
