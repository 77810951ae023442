// ProcessGroupHCCL: construction, the collective() path every op takes, and
// coalescing. The ops themselves are in ProcessGroupHCCLOps.cpp.
// See ProcessGroupHCCL.hpp and Note [Collectives run on a communication thread].
#include "distributed/ProcessGroupHCCL.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <utility>

#include "core/ExternalStreams.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"
#include "npurt/npurt.hpp"

namespace c10d_npu {

namespace {

using StatePtr = std::shared_ptr<CollectiveState>;

// The ready task: signals the communication thread that the stream reached
// the collective, or, when the stream discards it (failure state, exit), that
// it never will. Quick, so it never holds a core for long.
int runReady(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  (*static_cast<StatePtr*>(user))->signal(CollectiveState::Ready::kRan);
  return 0;
}

void releaseReady(void* user) {
  const std::unique_ptr<StatePtr> state(static_cast<StatePtr*>(user));
  (*state)->signal(CollectiveState::Ready::kDiscarded);  // no-op after a run
}

// The check task: fails with gloo's error, so the communication stream
// reports it once (Note [Task failure rule]).
int runCheck(void* user, char* errorBuf, size_t errorBufSize) {
  const std::string message = (*static_cast<StatePtr*>(user))->errorMessage();
  if (message.empty()) return 0;
  std::snprintf(errorBuf, errorBufSize, "%s", message.c_str());
  return 1;
}

void releaseCheck(void* user) { delete static_cast<StatePtr*>(user); }

void launchStateTask(const c10_npu::NPUStream& stream, const char* name, const StatePtr& state,
                     int (*run)(void*, char*, size_t), void (*release)(void*)) {
  npuTask task{};
  task.name = name;
  task.run = run;
  task.release = release;
  task.userData = new StatePtr(state);  // owned by the task from here on
  c10_npu::queue::launch(stream, task);
}

void checkTensor(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "ProcessGroupHCCL::", op, ": expected defined tensors, but got an ",
              "undefined one");
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "ProcessGroupHCCL::", op,
              ": expected npu tensors, but got a tensor on ", t.device(),
              "; use a gloo group (or init_process_group(\"cpu:gloo,npu:hccl\")) for CPU tensors");
  TORCH_CHECK(t.layout() == c10::kStrided, "ProcessGroupHCCL::", op,
              ": only dense tensors are supported, but got layout ", t.layout());
  TORCH_CHECK(t.is_non_overlapping_and_dense(), "ProcessGroupHCCL::", op,
              ": expected dense (contiguous or permuted) tensors, but got sizes ", t.sizes(),
              " and strides ", t.strides(), "; call .contiguous() first");
}

}  // namespace

ProcessGroupHCCL::ProcessGroupHCCL(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                   c10::intrusive_ptr<Options> options,
                                   c10::intrusive_ptr<c10d::Backend> transport)
    : Backend(rank, size),
      store_(std::move(store)),
      options_(options ? std::move(options) : c10::make_intrusive<Options>()),
      gloo_(std::move(transport)) {
  TORCH_CHECK(store_, "ProcessGroupHCCL: expected a store, but got None");
  TORCH_CHECK(gloo_, "ProcessGroupHCCL: expected a transport backend, but got None");
  TORCH_CHECK(gloo_->getRank() == rank && gloo_->getSize() == size,
              "ProcessGroupHCCL: the transport has rank ", gloo_->getRank(), " of ",
              gloo_->getSize(), ", but the group was created for rank ", rank, " of ", size);
  commThread_ = std::make_unique<CommThread>(rank);
}

ProcessGroupHCCL::~ProcessGroupHCCL() = default;

std::optional<c10_npu::NPUStream> ProcessGroupHCCL::commStream() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return commStream_;
}

void ProcessGroupHCCL::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!coalescing_, "ProcessGroupHCCL::startCoalescing: already coalescing; call ",
              "endCoalescing first");
  coalescing_ = true;
  coalescedWorks_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::endCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(coalescing_, "ProcessGroupHCCL::endCoalescing: startCoalescing was not called");
  coalescing_ = false;
  auto works = std::exchange(coalescedWorks_, {});
  if (works.empty()) return {};
  if (works.size() == 1) return works.front();
  return c10::make_intrusive<CoalescedWorkHCCL>(getRank(), std::move(works));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::batchIsendIrecv(
    const std::vector<std::string>& opTypes, std::vector<at::Tensor>& tensors,
    const std::vector<int64_t>& remoteRanks) {
  TORCH_CHECK(!tensors.empty(), "ProcessGroupHCCL::batch_isend_irecv: expected at least one "
              "operation, but got none");
  TORCH_CHECK(opTypes.size() == tensors.size() && remoteRanks.size() == tensors.size(),
              "ProcessGroupHCCL::batch_isend_irecv: expected as many operation types and remote "
              "ranks as tensors, but got ", opTypes.size(), " types, ", remoteRanks.size(),
              " ranks and ", tensors.size(), " tensors");
  // Everything is checked before the first operation is queued: a block
  // refused half-way would leave its first operations waiting for peers.
  for (size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK(opTypes[i] == "isend" || opTypes[i] == "irecv", "ProcessGroupHCCL::"
                "batch_isend_irecv: expected operation types \"isend\" or \"irecv\", but got \"",
                opTypes[i], "\" at index ", i);
    TORCH_CHECK(remoteRanks[i] >= 0 && remoteRanks[i] < getSize() && remoteRanks[i] != getRank(),
                "ProcessGroupHCCL::batch_isend_irecv: expected remote ranks in [0, ", getSize(),
                ") other than this rank (", getRank(), "), but got ", remoteRanks[i],
                " at index ", i);
    checkTensor("batch_isend_irecv", tensors[i]);
  }
  startCoalescing();
  try {
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<at::Tensor> one{tensors[i]};
      const int peer = static_cast<int>(remoteRanks[i]);
      if (opTypes[i] == "isend") {
        send(one, peer, /*tag=*/0);
      } else {
        recv(one, peer, /*tag=*/0);
      }
    }
  } catch (...) {
    endCoalescing();  // what was queued completes; the block is closed
    throw;
  }
  return endCoalescing();
}

c10::DeviceIndex ProcessGroupHCCL::bindDevice(const Call& call) {
  std::optional<c10::DeviceIndex> device = call.device;
  for (const auto* list : {&call.inputs, &call.outputs}) {
    for (const at::Tensor& t : *list) {
      checkTensor(call.name, t);
      TORCH_CHECK(!device || *device == t.device().index(), "ProcessGroupHCCL::", call.name,
                  ": expected every tensor on npu:", *device, ", but got one on ", t.device());
      device = t.device().index();
    }
  }
  if (!device) device = commStream_ ? commStream_->device_index() : c10_npu::current_device();
  if (!commStream_) {
    // Pool streams, as torch_npu's; the priority is the option's. See Note
    // [ProcessGroupHCCL options on the simulator].
    commStream_ = c10_npu::getStreamFromPool(options_->is_high_priority_stream, *device);
  }
  TORCH_CHECK(commStream_->device_index() == *device, "ProcessGroupHCCL::", call.name,
              ": this group drives npu:", commStream_->device_index(),
              " (the device of its first collective), but got tensors on npu:", *device,
              "; create one group per device");
  return *device;
}

c10_npu::NPUStream ProcessGroupHCCL::streamFor(const Call& call) {
  if (call.peer < 0) return *commStream_;
  const auto key = std::make_pair(call.peer, call.sends);
  auto it = p2pStreams_.find(key);
  if (it == p2pStreams_.end()) {
    it = p2pStreams_
             .emplace(key, c10_npu::getStreamFromPool(options_->is_high_priority_stream,
                                                      commStream_->device_index()))
             .first;
  }
  return it->second;
}

npuDeferredRecord_t ProcessGroupHCCL::enqueueOnCommStream(const c10_npu::NPUStream& current,
                                                          const c10_npu::NPUStream& comm,
                                                          const Call& call,
                                                          const StatePtr& state, WorkHCCL& work) {
  // After the work queued before the call on the current stream.
  orderEvent_.record(current);
  orderEvent_.block(comm);
  for (const auto* list : {&call.inputs, &call.outputs}) {
    for (const at::Tensor& t : *list) {
      c10_npu::NPUCachingAllocator::recordStream(t.storage().data_ptr(), comm);
    }
  }
  // A fresh runtime event per gate: a queued wait binds to the version that
  // is latest when the consumer submits it, so a shared event could bind an
  // earlier collective's wait to a later gate.
  npuEvent_t gateEvent = nullptr;
  npuDeferredRecord_t gate = nullptr;
  {
    npurt::DeviceGuard guard(comm.device_index());
    NPU_CHECK(npuEventCreateWithFlags(&gateEvent, npuEventDisableTiming));
    const npuError_t status = npuEventRecordDeferred(gateEvent, &gate);
    if (status != npuSuccess) (void)npuEventDestroy(gateEvent);
    NPU_CHECK(status);
  }
  try {
    launchStateTask(comm, "hccl ready", state, &runReady, &releaseReady);
    c10_npu::queue::waitEvent(comm, gateEvent);
    c10_npu::queue::destroyEvent(gateEvent);  // the bound wait still resolves
    gateEvent = nullptr;
    launchStateTask(comm, "hccl check", state, &runCheck, &releaseCheck);
    work.endEvent().record(comm);
  } catch (...) {
    (void)npuEventCompleteDeferred(gate);  // nothing may stay parked on it
    if (gateEvent != nullptr) c10_npu::queue::destroyEvent(gateEvent);
    throw;
  }
  return gate;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::collective(Call call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const c10::DeviceIndex device = bindDevice(call);
  c10_npu::external::checkCurrentStreamNotExternal(device, "ProcessGroupHCCL::collective");
  const c10_npu::NPUStream current = c10_npu::getCurrentNPUStream(device);
  TORCH_CHECK(!(c10_npu::graphs::anyCapture() && c10_npu::graphs::isCapturing(current)),
              "ProcessGroupHCCL::", call.name, " cannot be captured in an NPU graph: the "
              "simulator's hccl backend runs collectives through a host thread; issue it "
              "outside the capture");
  auto state = std::make_shared<CollectiveState>(call.name);
  updateEphemeralTimeout(state);
  ++seq_;
  auto work = c10::make_intrusive<WorkHCCL>(getRank(), call.type, call.name, device, call.outputs,
                                            state, call.blocking);
  CommItem item;
  item.state = state;
  item.gate = enqueueOnCommStream(current, streamFor(call), call, state, *work);
  item.issue = [gloo = gloo_, issue = std::move(call.issue)] { return issue(*gloo); };
  item.work = work;
  item.outputs = std::move(call.outputs);
  commThread_->submit(std::move(item));
  if (coalescing_) coalescedWorks_.push_back(work);
  return work;
}

}  // namespace c10d_npu
