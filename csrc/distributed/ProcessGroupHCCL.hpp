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
//
// Options (torch_npu's ProcessGroupHCCL::Options) and what each means here:
// Note [ProcessGroupHCCL options on the simulator].
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "distributed/CommThread.hpp"
#include "distributed/WorkHCCL.hpp"

namespace c10d_npu {

class ProcessGroupHCCL : public c10d::Backend {
 public:
  // torch_npu's options of an hccl group, with its field names and defaults.
  // See Note [ProcessGroupHCCL options on the simulator]
  // (ProcessGroupHCCLOptions.cpp). Plain data, not thread-safe: filled in
  // before the group is built; afterwards the group alone writes `timeout`
  // (setTimeout, under its lock).
  struct Options : c10d::Backend::Options {
    explicit Options(bool isHighPriorityStream = false);

    // torch_npu's HCCL communicator settings ("hccl_buffer_size", ...):
    // recorded, without effect (there is no HCCL communicator).
    std::unordered_map<std::string, std::variant<uint32_t, uint64_t, int32_t, std::string>>
        hccl_config;
    // torch_npu's per-operation timeout of its watchdog: recorded.
    std::chrono::milliseconds opTimeout;
    // Collectives run on a high-priority pool stream (else a normal one).
    bool is_high_priority_stream;
    // Set by the creator that torch.distributed calls: recorded.
    std::vector<uint32_t> global_ranks_in_group;
    std::string group_id;
  };

  // torch_npu's 10 s default of Options::opTimeout.
  static constexpr std::chrono::milliseconds kOpTimeout{10 * 1000};

  // `transport`: a ProcessGroupGloo of the same rank and size, built over
  // `store` with options->timeout (the binding builds it: the wheel has no
  // gloo headers). `options` may be null: Options() then.
  ProcessGroupHCCL(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                   c10::intrusive_ptr<Options> options,
                   c10::intrusive_ptr<c10d::Backend> transport);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override { return "hccl"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  c10::intrusive_ptr<Options> getOptions() const { return options_; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // Sets options->timeout and the transport's; collectives issued from now on
  // use it.
  void setTimeout(std::chrono::milliseconds timeout) override;
  // Extends the timeout of the collectives called from now until the first
  // of them completed (torch_npu's and ProcessGroupNCCL's contract). Note
  // [Ephemeral timeout].
  void addEphemeralTimeout(std::chrono::milliseconds timeout);
  // Sequence numbers count the collectives called on the group, from 0 (as
  // ProcessGroupNCCL's and torch_npu's, which also start at 0 on every rank).
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  // The store the group was built over (the prefix store torch.distributed
  // gave it).
  c10::intrusive_ptr<c10d::Store> store() const { return store_; }
  // The transport (for tests and for the CPU side of benchmarks).
  c10::intrusive_ptr<c10d::Backend> transport() const;
  // Replaces the transport (reinit_process_group: torch_npu rebuilds its HCCL
  // communicators there). Collectives called before keep the old transport;
  // later ones use `transport`, which must have this group's rank and size.
  void setTransport(c10::intrusive_ptr<c10d::Backend> transport);
  // How many times setTransport was called (for naming the new transport's
  // store prefix).
  int transportGeneration() const;
  // The communication stream, once a collective bound the group to a device.
  std::optional<c10_npu::NPUStream> commStream() const;

  // torch_npu's batch_isend_irecv: `opTypes[i]` ("isend" or "irecv") of
  // `tensors[i]` with group rank `remoteRanks[i]`, all in one coalesced
  // block; the one Work covers every operation.
  c10::intrusive_ptr<c10d::Work> batchIsendIrecv(const std::vector<std::string>& opTypes,
                                                 std::vector<at::Tensor>& tensors,
                                                 const std::vector<int64_t>& remoteRanks);

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

  // Applies the ephemeral timeout's reset once its first collective
  // completed. Caller holds mutex_. Note [Ephemeral timeout].
  void updateEphemeralTimeout(const std::shared_ptr<CollectiveState>& state);

  const c10::intrusive_ptr<c10d::Store> store_;
  const c10::intrusive_ptr<Options> options_;
  mutable std::mutex mutex_;                      // orders collectives; guards the fields below
  c10::intrusive_ptr<c10d::Backend> gloo_;        // the transport
  int transportGeneration_ = 0;
  uint64_t seq_ = 0;                              // collectives called
  std::chrono::milliseconds ephemeral_{0};        // Note [Ephemeral timeout]
  std::shared_ptr<CollectiveState> ephemeralFirst_;  // its first collective
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
