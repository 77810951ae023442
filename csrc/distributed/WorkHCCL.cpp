// See WorkHCCL.hpp and Note [WorkHCCL completes through an event].
#include "distributed/WorkHCCL.hpp"

#include <ATen/core/jit_type.h>

#include <utility>

#include "core/NPUStream.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.h"

namespace c10d_npu {

WorkHCCL::WorkHCCL(int rank, c10d::OpType opType, const char* name, c10::DeviceIndex device,
                   std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveState> state,
                   bool blocking)
    : Work(rank, opType, name),
      device_(device),
      outputs_(std::move(outputs)),
      state_(std::move(state)),
      blocking_(blocking),
      // Host-side future: it completes on the communication thread once the
      // device work is done, so waiting on it needs no device events.
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkHCCL::~WorkHCCL() = default;

bool WorkHCCL::isCompleted() { return state_->completed(); }

bool WorkHCCL::isSuccess() const { return state_->completed() && !state_->error(); }

std::exception_ptr WorkHCCL::exception() const { return state_->error(); }

int WorkHCCL::sourceRank() const {
  TORCH_CHECK(state_->completed(), "ProcessGroupHCCL::", state_->name(),
              ": the source rank is known once the receive completed; call wait() first");
  return state_->sourceRank();
}

std::vector<at::Tensor> WorkHCCL::result() { return outputs_; }

void WorkHCCL::synchronize() { streamWait(); }

void WorkHCCL::blockCurrentStream() { streamWait(); }

bool WorkHCCL::wait(std::chrono::milliseconds /*timeout: gloo's own applies*/) {
  if (blocking_) {
    state_->waitCompleted();
  }
  if (auto error = state_->error()) std::rethrow_exception(error);
  streamWait();
  return true;
}

void WorkHCCL::streamWait() {
  end_.block(c10_npu::getCurrentNPUStream(device_));
}

void WorkHCCL::waitDeviceDone() noexcept {
  if (!end_.isCreated()) return;
  // Not NPUEvent::synchronize: its drain would take a launch failure that
  // belongs to the stream's own synchronize.
  c10_npu::queue::waitSubmittedDevice(device_);
  (void)npuEventSynchronize(end_.event());
}

c10::intrusive_ptr<c10::ivalue::Future> WorkHCCL::getFuture() { return future_; }

void WorkHCCL::completeFuture() noexcept {
  if (auto error = state_->error()) {
    future_->setErrorIfNeeded(error);
    return;
  }
  try {
    future_->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    // A callback of the future raised: the future keeps its error.
    future_->setErrorIfNeeded(std::current_exception());
  }
}

}  // namespace c10d_npu
