// Kernels of sparse npu tensors that do not need the sparse op path (Note
// [Sparse npu tensors] in SparseTensors.h): PyTorch's device-generic kernels
// of the metadata ops, which only rearrange component tensors or call dense
// ops on them, and to_dense. Registration only, apart from to_dense.
#include <ATen/ATen.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "core/NPUException.h"

namespace c10_npu::aten::sparse {
namespace {

// Note [Sparse to dense without a host sync]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's sparse_to_dense adds the sparse tensor to zeros, through
// add_out_sparse_cpu (or CUDA's), which the npu could only run on the sparse
// op path, a host sync. The result's shape does not depend on the data, so
// this is zeros plus an accumulating index_put_ of the values at the
// indices: two dense ops queued on the current stream. Duplicate
// (uncoalesced) indices add up, as they do in to_dense. An index past the
// sizes fails index_put_'s task with its bounds message.
at::Tensor cooToDense(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                      std::optional<bool> /*masked_grad*/) {
  // PyTorch's words (sparse_to_dense).
  TORCH_CHECK(!dtype.has_value(), "dtype argument is not supported by sparse_to_dense");
  at::Tensor dense = at::zeros(self.sizes(), self.options().layout(c10::kStrided));
  if (self._nnz() == 0) return dense;
  const at::Tensor indices = self._indices();
  c10::List<std::optional<at::Tensor>> at_indices;
  for (int64_t d = 0; d < self.sparse_dim(); ++d) at_indices.push_back(indices.select(0, d));
  return dense.index_put_(at_indices, self._values(), /*accumulate=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  using namespace at::native;
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(empty_sparse_symint));
  m.impl("empty_like", TORCH_FN(empty_like_sparse_coo));
  m.impl("_indices", TORCH_FN(_indices_sparse));
  m.impl("_values", TORCH_FN(_values_sparse));
  m.impl("indices", TORCH_FN(indices_sparse));
  m.impl("values", TORCH_FN(values_sparse));
  m.impl("sparse_dim", TORCH_FN(sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(resize_as_sparse_));
  m.impl("copy_", TORCH_FN(copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(copy_sparse_));
  m.impl("clone", TORCH_FN(clone_sparse));
  m.impl("zero_", TORCH_FN(zero_sparse_));
  m.impl("_to_dense", TORCH_FN(cooToDense));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  using namespace at::native;
  m.impl("empty.memory_format", TORCH_FN(empty_sparse_compressed_symint));
  m.impl("empty_like", TORCH_FN(empty_like_sparse_csr));
  m.impl("crow_indices", TORCH_FN(crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(row_indices_sparse_csr));
  m.impl("values", TORCH_FN(values_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(dense_dim_sparse_csr));
  m.impl("_nnz", TORCH_FN(_nnz_sparse_csr));
  m.impl("resize_as_sparse_", TORCH_FN(resize_as_sparse_compressed_));
  m.impl("copy_", TORCH_FN(copy_sparse_compressed_));
  m.impl("clone", TORCH_FN(clone_sparse_compressed));
  m.impl("zero_", TORCH_FN(zero_sparse_csr_));
}

}  // namespace c10_npu::aten::sparse
