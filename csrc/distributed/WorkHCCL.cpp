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

bool WorkHCCL::deviceDone() const {
  if (state_->completed()) return true;
  // The end event may complete a moment before the completer thread marks
  // the state: work queued after wait() can already have run.
  try {
    return end_.query();
  } catch (...) {
    return false;  // a runtime error here belongs to the stream's synchronize
  }
}

bool WorkHCCL::isCompleted() { return deviceDone(); }

bool WorkHCCL::isSuccess() const { return deviceDone() && !state_->error(); }

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

CoalescedWorkHCCL::CoalescedWorkHCCL(int rank, std::vector<c10::intrusive_ptr<WorkHCCL>> works)
    : Work(rank, c10d::OpType::COALESCED, "hccl coalesced"), works_(std::move(works)) {}

bool CoalescedWorkHCCL::isCompleted() {
  for (const auto& work : works_) {
    if (!work->isCompleted()) return false;
  }
  return true;
}

bool CoalescedWorkHCCL::isSuccess() const {
  for (const auto& work : works_) {
    if (!work->isSuccess()) return false;
  }
  return true;
}

std::exception_ptr CoalescedWorkHCCL::exception() const {
  for (const auto& work : works_) {
    if (auto error = work->exception()) return error;
  }
  return nullptr;
}

std::vector<at::Tensor> CoalescedWorkHCCL::result() {
  std::vector<at::Tensor> all;
  for (const auto& work : works_) {
    auto outputs = work->result();
    all.insert(all.end(), outputs.begin(), outputs.end());
  }
  return all;
}

void CoalescedWorkHCCL::synchronize() {
  for (const auto& work : works_) work->synchronize();
}

bool CoalescedWorkHCCL::wait(std::chrono::milliseconds timeout) {
  for (const auto& work : works_) work->wait(timeout);
  return true;
}

void CoalescedWorkHCCL::blockCurrentStream() {
  for (const auto& work : works_) work->blockCurrentStream();
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWorkHCCL::getFuture() {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(
      c10::FutureType::create(c10::ListType::create(c10::TensorType::get())));
  for (const auto& work : works_) futures.push_back(work->getFuture());
  return c10::collectAll(futures);
}

}  // namespace c10d_npu
