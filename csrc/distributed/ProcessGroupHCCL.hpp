// c10d_npu::ProcessGroupHCCL — torch.distributed's "hccl" backend for npu
// tensors on the simulated NPU.
//
// Layer: distributed (csrc/distributed). Depends on the framework core and on
// the c10d headers of the torch wheel; never on the op layer.
//
// The transport is a ProcessGroupGloo built from the same store, rank, size
// and timeout (the wheel has no gloo headers, so the binding hands it over as
// a c10d::Backend): device memory is host memory in the simulator, so gloo
// runs over CPU aliases of the npu tensors (core/CPUAlias.h). What this class
// adds is torch_npu's ProcessGroupHCCL stream semantics:
//  - a collective is ordered after the work queued before it on the caller's
//    current stream (an event recorded there, waited by the group's
//    communication stream) and runs on that communication stream;
//  - its tensors are record_stream'ed on the communication stream, so the
//    caching allocator does not reuse them before it ran;
//  - its Work completes through an event (Note [WorkHCCL completes through an
//    event]).
// How a collective runs without holding an executor core while gloo waits for
// the peers: Note [Collectives run on a communication thread].
//
// One group drives one device (the device of its first collective, as
// torch_npu's groups bind theirs); every public function is thread-safe, and
// collectives called from several threads are issued in the order their calls
// took the group's lock.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "distributed/CommThread.hpp"
#include "distributed/WorkHCCL.hpp"

namespace c10d_npu {

class ProcessGroupHCCL : public c10d::Backend {
 public:
  // `gloo`: the transport, a ProcessGroupGloo of the same rank and size.
  ProcessGroupHCCL(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override { return "hccl"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  // The transport (for tests and for the CPU side of benchmarks).
  c10::intrusive_ptr<c10d::Backend> transport() const { return gloo_; }
  // The communication stream, once a collective bound the group to a device.
  std::optional<c10_npu::NPUStream> commStream() const;

  // The collectives. Same contract as c10d::Backend's; see the class comment.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

 private:
  // How one collective is described to collective().
  struct Call {
    using Issue = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend& gloo)>;
    Call(const char* name_, c10d::OpType type_, std::vector<at::Tensor> inputs_,
         std::vector<at::Tensor> outputs_, Issue issue_)
        : name(name_),
          type(type_),
          inputs(std::move(inputs_)),
          outputs(std::move(outputs_)),
          issue(std::move(issue_)) {}

    const char* name;                 // "allreduce": for errors and traces
    c10d::OpType type;
    std::vector<at::Tensor> inputs;   // npu tensors read
    std::vector<at::Tensor> outputs;  // npu tensors written (poisoned on failure)
    Issue issue;  // calls gloo over CPU aliases; runs on the issuer thread
    bool blocking = false;  // wait() blocks the host (barrier, recv from any source)
    std::optional<c10::DeviceIndex> device;  // for calls without tensors
    int peer = -1;        // point to point: the other rank (its own stream)
    bool sends = false;   // point to point: direction
  };

  // Every collective goes through here: validates, orders it on the
  // communication stream, hands it to the communication thread, returns its
  // Work. See Note [Collectives run on a communication thread].
  c10::intrusive_ptr<c10d::Work> collective(Call call);
  // The device the group drives; binds it on first use. Caller holds mutex_.
  c10::DeviceIndex bindDevice(const Call& call);
  // The stream a call runs on: the communication stream, or for point to
  // point the stream of its peer and direction. Caller holds mutex_.
  c10_npu::NPUStream streamFor(const Call& call);
  // Queues the three tasks of a collective and the end event on `comm`.
  // Caller holds mutex_.
  npuDeferredRecord_t enqueueOnCommStream(const c10_npu::NPUStream& current,
                                          const c10_npu::NPUStream& comm, const Call& call,
                                          const std::shared_ptr<CollectiveState>& state,
                                          WorkHCCL& work);

  const c10::intrusive_ptr<c10d::Backend> gloo_;
  mutable std::mutex mutex_;                      // orders collectives; guards the fields below
  std::optional<c10_npu::NPUStream> commStream_;  // set with the device, on first use
  // Point-to-point streams by (peer, sends). See Note [Collectives run on a
  // communication thread].
  std::map<std::pair<int, bool>, c10_npu::NPUStream> p2pStreams_;
  c10_npu::NPUEvent orderEvent_;                  // current stream -> communication stream
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkHCCL>> coalescedWorks_;  // of the open block
  std::unique_ptr<CommThread> commThread_;  // last: joined first on destruction
};

}  // namespace c10d_npu
