// c10d_npu::rpc — the device trailer of an NPU_TENSORPIPE message.
//
// Layer: distributed (csrc/distributed/rpc).
//
// Note [NPU tensors cross TensorPipe as CPU bytes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch's TensorPipeAgent (in the CPU wheel) moves the bytes of CPU tensors
// only: its serializer names every mapped non-CPU target device "cuda" on the
// wire (and its receiver would build a CUDA tensor), and the wheel's
// TensorPipe has CPU channels only. torch_npu forks the agent and TensorPipe
// for NPU buffers; here device memory is host memory, so the agent is torch's
// and only the edges change (NPUTensorPipeAgent):
//  - torch's agent still computes, per tensor, the target device from the
//    sender's device map (or the reverse map for a response), with torch's
//    errors for a missing or incomplete map.
//  - The writer (pipeWrite) waits for the streams of the message's npu
//    tensors (Note [An npu tensor is sent after its stream's work] in
//    NPUTensorPipeAgent.cpp) and sends every tensor as CPU bytes: npu tensors
//    through the PrivateUse1 TensorPipe converter (TensorPipeNPUConverter.cpp),
//    which hands TensorPipe the device memory itself, no copy. The target
//    devices ride along as one more tensor at the end of the message, the
//    trailer (one int64 per tensor, -1 for CPU, after a magic number).
//  - The reader strips the trailer and copies each tensor to its target npu
//    device on the receiving streams (the request callback for requests, the
//    send() future for responses), so the message that torch's RPC layer
//    sees holds the tensors where the device map put them, and a received
//    tensor is ready on the receiver's current stream once the future says so
//    (Future::wait makes the current stream wait for the receiving streams).
// Every message of an NPU_TENSORPIPE agent carries a trailer, so a reader
// can tell a peer of another backend (no trailer) and refuses its message.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <vector>

namespace c10d_npu::rpc {

// Appends the trailer for `targets` (one device per tensor of `tensors`, or
// empty: all CPU) to `tensors`. Thread-safe (touches only its arguments).
void appendDeviceTrailer(std::vector<at::Tensor>& tensors,
                         const std::vector<c10::Device>& targets);

// Removes the trailer from `tensors` and moves every tensor whose target is
// an npu device there, on the streams of `streams` (one per device the agent
// uses). Raises if the last tensor is not a trailer for these tensors (the
// peer is not an NPU_TENSORPIPE agent). Thread-safe (touches only its
// arguments); blocks the host until the copies ran (pageable host memory).
void applyDeviceTrailer(std::vector<at::Tensor>& tensors, const std::vector<c10::Stream>& streams);

}  // namespace c10d_npu::rpc
