// Results of functional CPU kernels computed straight into an op's outputs.
// Internal to csrc/aten; used by the op tasks (OpTask.cpp).
//
// Note [Results computed in place of the output]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An op without an out= CPU kernel (relu, native_layer_norm, ...: their
// out= variants are PyTorch's generated ones, which call the functional
// kernel and copy) runs its functional CPU kernel, which allocates its
// result, and the task copies that result into the output the op path
// allocated on the device: a temporary and a full copy per op. So while such a task runs its
// kernel, it offers the outputs' memory to the CPU allocator of its executor thread: the first
// allocation of exactly an output's storage size gets that output's device memory (not owned;
// freeing it does nothing), and every other allocation, and every allocation of every other thread,
// goes to PyTorch's CPU allocator as before. Where the kernel allocated its result first (the
// common case: TensorIterator and empty_like allocate the result before any
// scratch), the result already is the output and the copy is skipped.
// Nothing depends on the guess being right: the task compares the result
// with the output afterwards, and copies unless the result lies exactly in
// the output's memory with the output's metadata. A scratch buffer that took
// an output's memory is dead when the kernel returns; if the result overlaps
// the output without being it (a view of such scratch), it is cloned before
// the copy. The outputs are fresh (no other tensor can see their memory
// before the task completes), so a kernel writing scratch there disturbs
// nothing.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace c10_npu::aten::detail {

// While alive, offers the output of a single-output op (`outputs`: CPU
// aliases of an op's fresh outputs; with more or fewer than one, nothing is
// offered) to the calling thread's CPU allocations. See
// Note [Results computed in place of the output]. Not thread-safe: one per
// thread at a time, on the thread that runs the kernel. The outputs must
// outlive it.
class ResultPlacement {
 public:
  explicit ResultPlacement(const std::vector<at::Tensor>& outputs);
  ~ResultPlacement();
  ResultPlacement(const ResultPlacement&) = delete;
  ResultPlacement& operator=(const ResultPlacement&) = delete;
};

// Whether `result` already is `out`: the same memory, sizes, strides and
// dtype, so that copying it would copy the bytes onto themselves.
// Thread-safe.
bool placedIn(const at::Tensor& result, const at::Tensor& out);

// Copies `result` into `out` unless it is placed there already; a result
// that overlaps `out` otherwise is cloned first. Thread-safe for distinct
// outputs.
void copyUnlessPlaced(const at::Tensor& out, const at::Tensor& result);

// How many functional results were found in their output and how many were
// copied, since the process started (tests). Thread-safe.
struct PlacementCounts {
  uint64_t placed;
  uint64_t copied;
};
PlacementCounts placementCounts();

}  // namespace c10_npu::aten::detail
