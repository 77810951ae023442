// ProcessGroupHCCL's settings: its Options, timeouts (the group's and the
// ephemeral extension), sequence numbers and the transport that
// reinit_process_group replaces. See ProcessGroupHCCL.hpp.
//
// Note [ProcessGroupHCCL options on the simulator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's ProcessGroupHCCL::Options, with its field names and defaults,
// is accepted by init_process_group("hccl", pg_options=...). What each field
// does here:
//  - timeout (`_timeout`): the transport's timeout, so a collective that a
//    peer does not join fails after it (torch.distributed sets it from
//    init_process_group's `timeout`, as for every backend);
//  - is_high_priority_stream: the communication streams come from the
//    high-priority pool when true, else from the normal one (torch_npu's
//    rule; its creator resets the flag to false, ours keeps the caller's
//    value: docs/COMPATIBILITY.md);
//  - hccl_config, op_timeout, global_ranks_in_group, group_id: recorded and
//    readable, without effect: they configure HCCL communicators and
//    torch_npu's watchdog, which the simulator does not have.
//
// Note [Ephemeral timeout]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// addEphemeralTimeout(t) extends the timeout of the collectives called from
// then on by t (calls add up) until the first of them completed, after which
// the group's own timeout applies again (the contract of torch_npu's and
// ProcessGroupNCCL's _add_ephemeral_timeout). A collective's timeout is the
// transport's when the issuer thread hands it to gloo, so the extension is
// set on the transport at once, and the reset happens at the first
// collective called after that first one completed: collectives called
// before the reset were called inside the window and keep the extension.
// Setting the transport's timeout while earlier collectives still run in
// gloo is what ProcessGroupGloo::setTimeout is for (torch.distributed calls
// it the same way); it affects the collectives issued after it.
#include "distributed/ProcessGroupHCCL.hpp"

#include <c10/util/Exception.h>

#include <utility>

namespace c10d_npu {

ProcessGroupHCCL::Options::Options(bool isHighPriorityStream)
    : c10d::Backend::Options("hccl"),
      opTimeout(kOpTimeout),
      is_high_priority_stream(isHighPriorityStream) {}

c10::intrusive_ptr<c10d::Backend> ProcessGroupHCCL::transport() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gloo_;
}

int ProcessGroupHCCL::transportGeneration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return transportGeneration_;
}

void ProcessGroupHCCL::setTransport(c10::intrusive_ptr<c10d::Backend> transport) {
  TORCH_CHECK(transport, "ProcessGroupHCCL: expected a transport backend, but got None");
  TORCH_CHECK(transport->getRank() == getRank() && transport->getSize() == getSize(),
              "ProcessGroupHCCL: the transport has rank ", transport->getRank(), " of ",
              transport->getSize(), ", but the group has rank ", getRank(), " of ", getSize());
  std::lock_guard<std::mutex> lock(mutex_);
  // Items already submitted hold the old transport (collective() captures
  // it), so they finish on it.
  gloo_ = std::move(transport);
  gloo_->setTimeout(options_->timeout + ephemeral_);
  ++transportGeneration_;
}

void ProcessGroupHCCL::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, "ProcessGroupHCCL::setTimeout: expected a positive timeout, "
              "but got ", timeout.count(), " ms");
  std::lock_guard<std::mutex> lock(mutex_);
  options_->timeout = timeout;
  gloo_->setTimeout(timeout + ephemeral_);
}

void ProcessGroupHCCL::addEphemeralTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() >= 0, "ProcessGroupHCCL::_add_ephemeral_timeout: expected a "
              "non-negative timeout, but got ", timeout.count(), " ms");
  std::lock_guard<std::mutex> lock(mutex_);
  ephemeral_ += timeout;
  ephemeralFirst_.reset();  // the window restarts at the next collective
  gloo_->setTimeout(options_->timeout + ephemeral_);
}

void ProcessGroupHCCL::updateEphemeralTimeout(const std::shared_ptr<CollectiveState>& state) {
  if (ephemeral_.count() == 0) return;
  if (!ephemeralFirst_) {
    ephemeralFirst_ = state;  // the first collective of the window
    return;
  }
  if (!ephemeralFirst_->completed()) return;
  ephemeral_ = std::chrono::milliseconds(0);
  ephemeralFirst_.reset();
  gloo_->setTimeout(options_->timeout);
}

void ProcessGroupHCCL::setSequenceNumberForGroup() {
  // Every rank starts at 0 and counts the same collectives: nothing to agree on.
}

uint64_t ProcessGroupHCCL::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  return seq_;
}

}  // namespace c10d_npu
