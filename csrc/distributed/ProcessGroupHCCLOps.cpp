// The collectives of ProcessGroupHCCL: each one checks what the transport
// cannot do (on the calling thread, so a bad call raises there and queues
// nothing), makes CPU aliases of its tensors and describes the gloo call to
// collective(). See ProcessGroupHCCL.hpp.
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <utility>

#include "core/CPUAlias.h"
#include "distributed/ProcessGroupHCCL.hpp"

namespace c10d_npu {

namespace {

using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Note [Dtypes the transport does not know]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// HCCL moves tensors of any dtype; gloo knows only some (no int16, uint16,
// uint32, uint64 or float8), and refuses the others on its own thread, after
// the collective was queued: the stream then fails, and so does every later
// collective on it. Collectives that only move data (gather, broadcast,
// all-to-all, send, ...) hand gloo such a tensor as a view of the same bytes
// with a dtype of the same size that it knows, which it copies bit for bit.
// Reductions need the arithmetic of the real dtype, so they refuse such
// tensors at the call (checkReduction).
bool transportKnows(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kChar:
    case c10::kByte:
    case c10::kInt:
    case c10::kLong:
    case c10::kBool:
    case c10::kComplexFloat:
    case c10::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// The CPU alias gloo is given for `npu`: see the note above.
at::Tensor transportAlias(const at::Tensor& npu) {
  at::Tensor cpu = c10_npu::cpuAlias(npu);
  if (transportKnows(cpu.scalar_type())) return cpu;
  switch (cpu.element_size()) {
    case 1: return cpu.view(c10::kByte);
    case 2: return cpu.view(c10::kHalf);
    case 4: return cpu.view(c10::kInt);
    case 8: return cpu.view(c10::kLong);
    default:
      TORCH_CHECK(false, "ProcessGroupHCCL: ", cpu.scalar_type(),
                  " tensors are not supported by the simulator's hccl backend");
  }
}

TensorList aliases(const TensorList& npu) {
  TensorList cpu;
  cpu.reserve(npu.size());
  for (const at::Tensor& t : npu) cpu.push_back(t.defined() ? transportAlias(t) : t);
  return cpu;
}

TensorLists aliases(const TensorLists& npu) {
  TensorLists cpu;
  cpu.reserve(npu.size());
  for (const TensorList& list : npu) cpu.push_back(aliases(list));
  return cpu;
}

TensorList flatten(const TensorLists& lists) {
  TensorList flat;
  for (const TensorList& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

const char* reduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// Refuses, on the calling thread, the reductions the transport cannot do
// (gloo would refuse them on its own thread, after the collective was queued).
// AVG is gloo's (a sum, then a division), hence floating point only.
void checkReduction(const char* opName, const c10d::ReduceOp& reduceOp,
                    const TensorList& tensors) {
  const c10d::ReduceOp::RedOpType op = reduceOp.op_;
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM && op != c10d::ReduceOp::UNUSED,
              "ProcessGroupHCCL::", opName, ": ReduceOp.", reduceOpName(op),
              " is not supported by the simulator's hccl backend (its transport, gloo, has no ",
              "such reduction); scale the tensors and use ReduceOp.SUM instead");
  for (const at::Tensor& t : tensors) {
    // Note [Dtypes the transport does not know].
    TORCH_CHECK(transportKnows(t.scalar_type()), "ProcessGroupHCCL::", opName, ": ",
                t.scalar_type(), " tensors cannot be reduced by the simulator's hccl backend ",
                "(its transport, gloo, has no ", t.scalar_type(),
                " arithmetic); convert them to a dtype it reduces (int32, int64, float32, ...) ",
                "first");
    const bool integral = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true);
    const bool bitwise = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR ||
                         op == c10d::ReduceOp::BXOR;
    TORCH_CHECK(!bitwise || integral, "ProcessGroupHCCL::", opName, ": ReduceOp.",
                reduceOpName(op), " needs integer or bool tensors, but got ", t.scalar_type());
    TORCH_CHECK(op != c10d::ReduceOp::AVG || !integral, "ProcessGroupHCCL::", opName,
                ": ReduceOp.AVG needs floating-point tensors, but got ", t.scalar_type(),
                "; use ReduceOp.SUM and divide");
  }
}

// CPU aliases of the flat tensors of an all-gather or reduce-scatter "into
// a tensor" (`big` holds `size` times the elements of `small`), for gloo.
// HCCL and NCCL read both as flat memory, so callers pass any shapes with the
// right element counts (SyncBatchNorm gathers C elements into [1, size * C]);
// gloo splits the big tensor along dim 0 and wants the pieces shaped like the
// small one, so both go to it flattened. Refuses, on the calling thread,
// element counts that disagree and tensors that are not contiguous.
std::pair<at::Tensor, at::Tensor> flatAliases(const char* opName, const at::Tensor& big,
                                              const char* bigName, const at::Tensor& small,
                                              int size) {
  TORCH_CHECK(big.numel() == small.numel() * size, "ProcessGroupHCCL::", opName, ": expected ",
              bigName, " to hold world_size (", size, ") times the elements of the other tensor (",
              small.numel(), "), but got ", big.numel(), " elements");
  TORCH_CHECK(big.is_contiguous() && small.is_contiguous(), "ProcessGroupHCCL::", opName,
              ": expected contiguous tensors; call .contiguous() first");
  return {transportAlias(big).view({-1}), transportAlias(small).view({-1})};
}

// Refuses a peer rank outside the group or equal to this rank.
void checkPeer(const char* opName, int peer, int rank, int size) {
  TORCH_CHECK(peer >= 0 && peer < size && peer != rank, "ProcessGroupHCCL::", opName,
              ": expected a peer rank in [0, ", size, ") other than this rank (", rank,
              "), but got ", peer);
}

// An already completed Work, for transport calls that return nothing.
WorkPtr completedWork() {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  future->markCompleted(c10::IValue());
  return c10d::Work::create_from_future(future);
}

}  // namespace

WorkPtr ProcessGroupHCCL::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  return collective({"broadcast", c10d::OpType::BROADCAST, tensors, tensors,
                     [cpu = aliases(tensors), opts](c10d::Backend& gloo) mutable {
                       return gloo.broadcast(cpu, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  checkReduction("allreduce", opts.reduceOp, tensors);
  return collective({"allreduce", c10d::OpType::ALLREDUCE, tensors, tensors,
                     [cpu = aliases(tensors), opts](c10d::Backend& gloo) mutable {
                       return gloo.allreduce(cpu, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::allreduce_coalesced(TensorList& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  checkReduction("allreduce_coalesced", opts.reduceOp, tensors);
  return collective({"allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors,
                     [cpu = aliases(tensors), opts](c10d::Backend& gloo) mutable {
                       return gloo.allreduce_coalesced(cpu, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  checkReduction("reduce", opts.reduceOp, tensors);
  return collective({"reduce", c10d::OpType::REDUCE, tensors, tensors,
                     [cpu = aliases(tensors), opts](c10d::Backend& gloo) mutable {
                       return gloo.reduce(cpu, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::allgather(TensorLists& outputs, TensorList& inputs,
                                    const c10d::AllgatherOptions& opts) {
  return collective({"allgather", c10d::OpType::ALLGATHER, inputs, flatten(outputs),
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable { return gloo.allgather(out, in, opts); }});
}

WorkPtr ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                          const c10d::AllgatherOptions& opts) {
  auto [out, in] = flatAliases("_allgather_base", output, "the output", input, getSize());
  return collective({"_allgather_base", c10d::OpType::_ALLGATHER_BASE, {input}, {output},
                     [out = std::move(out), in = std::move(in), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo._allgather_base(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                              const c10d::AllgatherOptions& opts) {
  return collective({"allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, inputs,
                     flatten(outputs),
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo.allgather_coalesced(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  return collective({"allgather_into_tensor_coalesced", c10d::OpType::COALESCED, inputs, outputs,
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo.allgather_into_tensor_coalesced(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::gather(TensorLists& outputs, TensorList& inputs,
                                 const c10d::GatherOptions& opts) {
  return collective({"gather", c10d::OpType::GATHER, inputs, flatten(outputs),
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable { return gloo.gather(out, in, opts); }});
}

WorkPtr ProcessGroupHCCL::scatter(TensorList& outputs, TensorLists& inputs,
                                  const c10d::ScatterOptions& opts) {
  return collective({"scatter", c10d::OpType::SCATTER, flatten(inputs), outputs,
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable { return gloo.scatter(out, in, opts); }});
}

WorkPtr ProcessGroupHCCL::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  checkReduction("reduce_scatter", opts.reduceOp, outputs);
  return collective({"reduce_scatter", c10d::OpType::REDUCE_SCATTER, flatten(inputs), outputs,
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo.reduce_scatter(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  checkReduction("_reduce_scatter_base", opts.reduceOp, {output});
  auto [in, out] = flatAliases("_reduce_scatter_base", input, "the input", output, getSize());
  return collective({"_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, {input}, {output},
                     [out = std::move(out), in = std::move(in), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo._reduce_scatter_base(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  checkReduction("reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
  return collective({"reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, inputs, outputs,
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable {
                       return gloo.reduce_scatter_tensor_coalesced(out, in, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                        std::vector<int64_t>& outputSplitSizes,
                                        std::vector<int64_t>& inputSplitSizes,
                                        const c10d::AllToAllOptions& opts) {
  return collective({"alltoall_base", c10d::OpType::ALLTOALL_BASE, {input}, {output},
                     [out = transportAlias(output), in = transportAlias(input),
                      outSplits = outputSplitSizes, inSplits = inputSplitSizes,
                      opts](c10d::Backend& gloo) mutable {
                       return gloo.alltoall_base(out, in, outSplits, inSplits, opts);
                     }});
}

WorkPtr ProcessGroupHCCL::alltoall(TensorList& outputs, TensorList& inputs,
                                   const c10d::AllToAllOptions& opts) {
  return collective({"alltoall", c10d::OpType::ALLTOALL, inputs, outputs,
                     [out = aliases(outputs), in = aliases(inputs), opts](
                         c10d::Backend& gloo) mutable { return gloo.alltoall(out, in, opts); }});
}

WorkPtr ProcessGroupHCCL::send(TensorList& tensors, int dstRank, int tag) {
  checkPeer("send", dstRank, getRank(), getSize());
  Call call{"send", c10d::OpType::SEND, tensors, {},
            [cpu = aliases(tensors), dstRank, tag](c10d::Backend& gloo) mutable {
              return gloo.send(cpu, dstRank, tag);
            }};
  call.peer = dstRank;
  call.sends = true;
  return collective(std::move(call));
}

WorkPtr ProcessGroupHCCL::recv(TensorList& tensors, int srcRank, int tag) {
  checkPeer("recv", srcRank, getRank(), getSize());
  Call call{"recv", c10d::OpType::RECV, {}, tensors,
            [cpu = aliases(tensors), srcRank, tag](c10d::Backend& gloo) mutable {
              return gloo.recv(cpu, srcRank, tag);
            }};
  call.peer = srcRank;
  return collective(std::move(call));
}

WorkPtr ProcessGroupHCCL::recvAnysource(TensorList& tensors, int tag) {
  Call call{"recvAnysource", c10d::OpType::RECVANYSOURCE, {}, tensors,
            [cpu = aliases(tensors), tag](c10d::Backend& gloo) mutable {
              return gloo.recvAnysource(cpu, tag);
            }};
  call.blocking = true;  // the source rank is a host value
  call.peer = getSize();   // a stream of its own: any peer
  return collective(std::move(call));
}

WorkPtr ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  Call call{"barrier", c10d::OpType::BARRIER, {}, {},
            [opts](c10d::Backend& gloo) { return gloo.barrier(opts); }};
  call.blocking = true;  // torch_npu's barrier blocks the host
  if (opts.device) call.device = opts.device->index();
  if (!opts.device_ids.empty()) call.device = static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  return collective(std::move(call));
}

void ProcessGroupHCCL::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  // Through the communication thread, so that it keeps its place in the
  // order of the group's gloo calls.
  Call call{"monitoredBarrier", c10d::OpType::BARRIER, {}, {},
            [opts, waitAllRanks](c10d::Backend& gloo) {
              gloo.monitoredBarrier(opts, waitAllRanks);
              return completedWork();
            }};
  call.blocking = true;
  collective(std::move(call))->wait();
}

}  // namespace c10d_npu
