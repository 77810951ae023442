// NPUGraph's conditional nodes: begin_capture_to_if_node and
// end_capture_to_conditional_node (CUDAGraph's, torch_npu's). See NPUGraph.h.
//
// Note [Conditional nodes in NPU graphs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.cond inside a capture (torch_npu.npu._npugraph_conditional_nodes)
// records both branches, each as the body of an npurt if node (Note
// [Conditional nodes] in csrc/npurt/README.md) reading the predicate tensor,
// so a replay runs the branch the predicate holds at that point of the
// replay. A body is an npurt capture of its own, on a stream of its own (a
// GRAPHBODY stream, Note [StreamId assignment]: a pool stream could be in use
// by another thread, whose work the body would then record) made current
// until the body ends; the framework treats it as part of the graph's
// capture:
//  - the registry maps the body's capture id to the graph's CaptureState, so
//    the body's allocations come from the graph's pool (the pool's route
//    asks recorderOf), get_currently_capturing_graph() finds the graph from
//    inside a body (nested torch.cond), and captured random ops reserve
//    their offsets from the graph's generators: random ops inside a branch
//    work, each replay drawing new numbers (CUDA and torch_npu refuse them);
//  - the predicate's storage is held by the graph until reset(), so its
//    memory is not handed to another tensor while replays read it;
//  - the queue is drained before each begin and end (Note [Capture is
//    visible at enqueue]), so the ops queued before the node are recorded
//    before it and the body's ops inside the body.
// An error that invalidates a body invalidates the whole capture (npurt's
// rule): end_capture_to_conditional_node raises it, and capture_end then
// reports the capture failed.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/NPUGraph.h"

namespace c10_npu {
namespace {

void checkPredicate(const at::Tensor& pred, c10::DeviceIndex device) {
  TORCH_CHECK(pred.defined() && pred.device().type() == c10::DeviceType::PrivateUse1,
              "Conditions must be on an npu device to use conditional nodes in npu graphs.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(pred.numel() == 1,
              "Conditions must be scalar tensors to use conditional nodes in npu graphs.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(pred.scalar_type() == at::kBool,
              "Conditions must be bool tensors to use conditional nodes in npu graphs.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(pred.device().index() == device,
              "Conditions must be on the same npu device as the graph capture.", NPU_ERROR_SUFFIX);
}

}  // namespace

void NPUGraph::begin_capture_to_if_node(const at::Tensor& pred) {
  TORCH_CHECK(!hasGraphExec_, "This NPUGraph instance already owns a captured graph.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(capturing_, "capture_begin() must be called before begin_capture_to_if_node().",
              NPU_ERROR_SUFFIX);
  checkPredicate(pred, device_);
  const NPUStream parent = getCurrentNPUStream(device_);
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  uint64_t parentId = 0;
  NPU_CHECK(npuStreamGetCaptureInfo(parent.rawHandle(), &status, &parentId));
  const uint64_t innermost =
      conditionalBodies_.empty() ? capture_->captureId : conditionalBodies_.back().captureId;
  TORCH_CHECK(status == npuStreamCaptureStatusActive && parentId == innermost,
              "Conditional capture must be started from the current NPUGraph capture stream.",
              NPU_ERROR_SUFFIX);
  const NPUStream body = acquireGraphBodyStream(device_);
  uint64_t bodyId = 0;
  try {
    queue::waitSubmittedDevice(device_);
    NPU_CHECK(
        npuStreamBeginCaptureToIf(parent.rawHandle(), pred.const_data_ptr(), body.rawHandle()));
    NPU_CHECK(npuStreamGetCaptureInfo(body.rawHandle(), &status, &bodyId));
  } catch (...) {
    releaseGraphBodyStream(body);
    throw;
  }
  graphs::registerCapture(bodyId, capture_);
  {
    std::lock_guard<std::mutex> lock(capture_->mutex);
    capture_->conditions.push_back(pred.storage());
  }
  conditionalBodies_.push_back(ConditionalBody{body, parent, bodyId});
  setCurrentNPUStream(body);
}

void NPUGraph::end_capture_to_conditional_node() {
  TORCH_CHECK(!conditionalBodies_.empty(),
              "end_capture_to_conditional_node() called without begin_capture_to_if_node().",
              NPU_ERROR_SUFFIX);
  const ConditionalBody body = conditionalBodies_.back();
  queue::waitSubmittedDevice(device_);
  const npuError_t status = npuStreamEndCaptureToIf(body.stream.rawHandle());
  if (status == npuErrorStreamCaptureWrongThread) {
    NPU_CHECK(status);  // the body goes on
  }
  const std::string message = status != npuSuccess ? npuGetLastErrorMessage() : "";
  graphs::unregisterCapture(body.captureId);
  releaseGraphBodyStream(body.stream);
  conditionalBodies_.pop_back();
  setCurrentNPUStream(body.previous);
  TORCH_CHECK(status == npuSuccess,
              "NPU graph capture of a conditional node failed: ", npuGetErrorName(status), ": ",
              message, NPU_ERROR_SUFFIX);
}

void NPUGraph::endConditionalBodies() noexcept {
  while (!conditionalBodies_.empty()) {
    const ConditionalBody body = conditionalBodies_.back();
    try {
      queue::waitSubmittedDevice(device_);
      setCurrentNPUStream(body.previous);
    } catch (...) {
      // Cannot fail for streams that exist; nothing better to do in reset().
    }
    (void)npuStreamEndCaptureToIf(body.stream.rawHandle());
    graphs::unregisterCapture(body.captureId);
    releaseGraphBodyStream(body.stream);
    conditionalBodies_.pop_back();
  }
}

void NPUGraph::releaseConditions() noexcept {
  if (capture_ == nullptr) return;
  std::vector<c10::Storage> conditions;
  {
    std::lock_guard<std::mutex> lock(capture_->mutex);
    conditions.swap(capture_->conditions);
  }
  // Dropped outside the lock: a storage's release may free a block.
}

}  // namespace c10_npu
