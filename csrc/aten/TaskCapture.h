// How a queued task holds the npu tensors it reads and writes. Shared by the
// generic op path (AsyncFallback.cpp) and the kernels written for ops that
// have no CPU kernel of their own (HostMathTask.h).
//
// Layer: ops (csrc/aten).
//
// Note [Task captures and memory reuse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task holds on to the memory it uses only where it must. A tensor whose
// block the caching allocator handed out on the task's own stream is
// captured as a CPU alias, which does not own the memory: if the program
// drops the tensor before the task ran, the block returns to the pool at
// once and the next allocation on that stream may take it. That is safe
// because whatever touches the block next is queued behind this task on the
// same stream; it is the rule of PyTorch's CUDA allocator, and it keeps a
// host that runs far ahead of the device from holding one block per queued
// op (and the device from walking through cold memory). Every other tensor
// (memory of another stream, which could be handed to work that does not
// wait for this task, or memory the allocator does not manage) is captured
// by reference and kept alive until the task ran. So a missing
// record_stream for such a tensor is harmless here, where on hardware it is
// a race. The alias is also a snapshot: a later resize_ or set_ of the
// tensor on the host does not change what the queued task sees.
#pragma once

#include <ATen/Tensor.h>

#include "core/NPUStream.h"

namespace c10_npu::aten {

// What a task on `stream` keeps of the npu tensor `npu`: a non-owning CPU
// alias if its memory was allocated on `stream`, else `npu` itself. Call on
// the enqueuing thread. Thread-safe.
at::Tensor captureForTask(const at::Tensor& npu, const NPUStream& stream);

// The kernel's view of a tensor a task captured (see captureForTask): an
// alias is one already; a tensor held by reference gets its alias now. Call
// inside the task. Thread-safe.
at::Tensor kernelView(const at::Tensor& captured);

}  // namespace c10_npu::aten
