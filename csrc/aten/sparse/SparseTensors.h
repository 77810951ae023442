// Sparse npu tensors (COO, CSR, CSC, BSR, BSC) as the op layer sees them:
// their component tensors, and their CPU twins for CPU kernels. See Note
// [Sparse npu tensors]. Internal to csrc/aten.
//
// Note [Sparse npu tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A sparse npu tensor is PyTorch's own SparseTensorImpl (COO) or
// SparseCsrTensorImpl (compressed layouts) whose component tensors (COO:
// indices and values; compressed: compressed indices, plain indices and
// values) are ordinary npu tensors, as on CUDA. Its key set holds
// SparsePrivateUse1 or SparseCsrPrivateUse1 (sparse/SparseKernels.cpp):
//  - metadata ops (constructors, _indices, values, _nnz, sparse_resize_,
//    copy_, clone, ...) use PyTorch's device-generic kernels, which only
//    rearrange component tensors or call dense ops on them, so their work is
//    queued on the current stream like any dense op's;
//  - to_dense is a scatter of the values into zeros (async, no host sync);
//  - every other sparse op takes the sparse op path (SparseOpPath.cpp): its
//    CPU kernel runs as a task on the current stream over CPU sparse tensors
//    assembled from CPU aliases of the components, the host waits, and the
//    results are written to fresh device memory in stream order. Most sparse
//    results have a data-dependent nnz, so this is a host sync, counted and
//    reported like the dense synchronous path's (Note [Host syncs of the op
//    path]).
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/SmallVector.h>

#include "core/NPUStream.h"

namespace c10_npu::aten::sparse {

// COO: {indices, values}; compressed layouts: {compressed indices, plain
// indices, values}. Raises for a strided tensor. Thread-safe.
c10::SmallVector<at::Tensor, 3> components(const at::Tensor& sparse);

// A CPU tensor of `npu`'s sparse layout, sizes, dtype and coalesced flag over
// the CPU aliases of its components (`copy`: over CPU copies of them, which
// a kernel may resize and replace). Validates the components as PyTorch's
// invariant checks do (index dtypes, shapes, indices within the sizes), so
// that a CPU kernel never reads out of bounds: a bad tensor raises, naming
// the problem. Only inside tasks (the aliases read device memory).
at::Tensor cpuTwin(const at::Tensor& npu, bool copy);

// A new sparse npu tensor with the layout, sizes and coalesced flag of `cpu`
// (a sparse CPU tensor the host may read: the stream was synchronized),
// whose components are written to fresh device memory of `device` by copy
// tasks on `stream`. Thread-safe.
at::Tensor toNpu(const at::Tensor& cpu, const NPUStream& stream, c10::DeviceIndex device);

// Gives the sparse npu tensor `npu` the sizes, components and coalesced flag
// of `cpu` (which a kernel computed from npu's twin), written as by toNpu.
// Not thread-safe for `npu` (an in-place change of its metadata).
void adopt(const at::Tensor& npu, const at::Tensor& cpu, const NPUStream& stream,
           c10::DeviceIndex device);

}  // namespace c10_npu::aten::sparse
