// c10d_npu::WorkHCCL — the Work of a ProcessGroupHCCL collective.
//
// Layer: distributed (csrc/distributed).
//
// Note [WorkHCCL completes through an event]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As torch_npu's WorkHCCL (and PyTorch's WorkNCCL), a Work owns the event
// recorded on the communication stream after the collective:
//  - wait() makes the caller's *current stream* wait for that event and
//    returns at once: work queued afterwards on that stream sees the result,
//    with no host synchronization. Only barrier (and a receive from any
//    source, whose source rank is a host value) block the host until the
//    collective completed, as torch_npu's barrier does.
//  - isCompleted() is a query: true once the collective finished on the
//    device (or failed).
//  - getFuture() completes (on the group's completer thread) once the
//    device work is done, with the output tensors, or with the error.
// A failure (gloo's error, a peer that died, a timeout) is raised by wait()
// once it is known, is the Future's error, poisons the outputs (reading
// them raises it, Note [Poisoned memory]) and is reported once by the
// communication stream (its check task fails), never hangs.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <vector>

#include "core/NPUEvent.h"
#include "distributed/CommThread.hpp"

namespace c10d_npu {

class WorkHCCL : public c10d::Work {
 public:
  // `blocking`: wait() blocks the host (barrier, receive from any source).
  WorkHCCL(int rank, c10d::OpType opType, const char* name, c10::DeviceIndex device,
           std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveState> state,
           bool blocking);
  ~WorkHCCL() override;

  // All of these are thread-safe. See Note [WorkHCCL completes through an event].
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // The end event, recorded on the communication stream by the group.
  c10_npu::NPUEvent& endEvent() { return end_; }
  // Blocks until the end event completed, without reporting failures (they
  // belong to the communication stream). For the communication thread.
  void waitDeviceDone() noexcept;
  // Completes the Future (value or error). Called once by the communication
  // thread after the device work is done.
  void completeFuture() noexcept;

 private:
  // True once the collective finished on the device (or failed).
  bool deviceDone() const;
  // Makes the current stream of the Work's device wait for the end event.
  void streamWait();

  const c10::DeviceIndex device_;
  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<CollectiveState> state_;
  const bool blocking_;
  c10_npu::NPUEvent end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The Work of a coalescing block (ProcessGroupHCCL::endCoalescing), e.g. the
// one request batch_isend_irecv returns: its collectives may run on several
// streams (point to point: one per peer and direction), so it completes when
// each of them did, and wait() makes the current stream wait for each.
// Thread-safe.
class CoalescedWorkHCCL : public c10d::Work {
 public:
  CoalescedWorkHCCL(int rank, std::vector<c10::intrusive_ptr<WorkHCCL>> works);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  // Completes when every collective's future did (c10::collectAll).
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  const std::vector<c10::intrusive_ptr<WorkHCCL>> works_;
};

}  // namespace c10d_npu
