// torch_npu's npu_change_data_ptr: points a tensor's storage into another
// tensor's memory, the primitive under torch_npu.utils.npu_combine_tensors
// and the fused optimizers (torch_npu/optim). Layer: core.
//
// Note [Storages moved into a combined buffer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu combines many tensors (parameters, gradients, optimizer states)
// into one contiguous buffer by replacing the data pointer of each tensor's
// *storage* with a pointer into the buffer. Every tensor that shares the
// storage (the Parameter, its .data, a model's reference) follows, which a
// Tensor.set_ of one tensor would not give. We do the same, with two
// differences that remove hazards torch_npu leaves to the caller:
//  - Ownership. torch_npu's new pointer owns nothing, so dropping the buffer
//    while a tensor still points into it leaves a dangling pointer. Ours
//    holds a reference to the buffer's storage: the buffer's memory lives as
//    long as any storage moved into it (and goes back to the caching
//    allocator, stream-ordered, after the last one).
//  - Queued work. The storage's old memory is freed at the call, as
//    torch_npu frees it. A task queued on the current stream captured memory
//    the caching allocator handed out on that stream as an alias of the old
//    pointer, and whatever reuses the freed block runs behind it (Note [Task
//    captures and memory reuse] in csrc/aten/OpTask.cpp). Any other storage
//    may be held by a queued task by reference (memory already moved into a
//    buffer; memory of another stream that a task of an external or
//    capturing stream uses, Note [Tasks on other streams record their use]),
//    and such a task reads the storage's pointer when it runs: it would read
//    the new memory. So for those (conservatively: for every storage whose
//    memory is not a block of the current stream) the
//    call first waits for the device (a host sync, counted under
//    "npu_change_data_ptr", Note [Host syncs of the op path]). The fused
//    optimizers combine fresh tensors of the current stream, which never
//    wait; combining an already combined tensor again does. Work queued on
//    another stream that uses the old memory must be ordered before the call
//    by the program, as for any free.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace c10_npu {

// Makes dst's storage point at element `index` of src's storage (dtype
// units, from the start of the storage, not of src's view). dst and src:
// npu tensors of the same device and dtype (float32, float16 or bfloat16,
// as torch_npu); dst's whole storage must fit in src's from `index`. The
// storage keeps its size; its old memory is freed. Raises c10::Error
// (torch_npu's messages where it has one) and changes nothing on bad input.
// See Note [Storages moved into a combined buffer]. Not thread-safe with
// respect to other users of dst's storage (as any in-place change of it).
void changeDataPtr(const at::Tensor& dst, const at::Tensor& src, int64_t index);

// torch_npu's get_storage_size: the number of elements of t's dtype that its
// storage holds (every npu format is ND here, so the storage's bytes divided
// by the element size). Raises for a tensor that is not an npu tensor.
// Thread-safe.
int64_t storageSize(const at::Tensor& t);

}  // namespace c10_npu
