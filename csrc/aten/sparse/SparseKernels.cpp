// Kernels of sparse npu tensors that do not need the sparse op path (Note
// [Sparse npu tensors] in SparseTensors.h): PyTorch's device-generic kernels
// of the metadata ops, which only rearrange component tensors or call dense
// ops on them, and to_dense. Registrations, with the device guard
// PyTorch's generated ones have (Note [Device guards of sparse kernels]).
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

#include <c10/core/DeviceGuard.h>

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/NPUException.h"

namespace c10_npu::aten::sparse {
namespace {

// Note [Device guards of sparse kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's sparse kernels make their component tensors with the device
// *type* of the sparse key (SparseTensorImpl's constructor), that is on the
// current device; the generated registrations of SparseCPU and SparseCUDA
// set a device guard first, from the device option or the first tensor. A
// kernel registered here with TORCH_FN has no such wrapper, so Guarded adds
// it: without it, `empty_like(x, device="npu:1")` is made on npu:0 and a
// tensor built from npu:1 components on npu:0 fails an internal assert.
template <typename T>
void noteDevice(std::optional<c10::Device>& tensorDevice, std::optional<c10::Device>& option,
                const T& arg) {
  using Arg = std::decay_t<T>;
  if constexpr (std::is_same_v<Arg, at::Tensor>) {
    if (!tensorDevice && arg.defined() && arg.device().type() == c10::DeviceType::PrivateUse1) {
      tensorDevice = arg.device();
    }
  } else if constexpr (std::is_same_v<Arg, std::optional<c10::Device>>) {
    if (arg.has_value() && arg->type() == c10::DeviceType::PrivateUse1 && arg->has_index()) {
      option = arg;
    }
  }
}

template <typename FuncPtr, FuncPtr fn>
struct Guarded;

template <typename Ret, typename... Args, Ret (*fn)(Args...)>
struct Guarded<Ret (*)(Args...), fn> {
  static Ret call(Args... args) {
    std::optional<c10::Device> tensorDevice;
    std::optional<c10::Device> option;
    (noteDevice(tensorDevice, option, args), ...);
    const c10::OptionalDeviceGuard guard(option ? option : tensorDevice);
    return fn(std::forward<Args>(args)...);
  }
};

#define NPU_GUARDED(fn) TORCH_FN((&Guarded<decltype(&fn), &fn>::call))

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
         NPU_GUARDED(new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", NPU_GUARDED(new_with_dims_sparse));
  m.impl("empty.memory_format", NPU_GUARDED(empty_sparse_symint));
  m.impl("empty_like", NPU_GUARDED(empty_like_sparse_coo));
  m.impl("_indices", NPU_GUARDED(_indices_sparse));
  m.impl("_values", NPU_GUARDED(_values_sparse));
  m.impl("indices", NPU_GUARDED(indices_sparse));
  m.impl("values", NPU_GUARDED(values_sparse));
  m.impl("sparse_dim", NPU_GUARDED(sparse_dim_sparse));
  m.impl("dense_dim", NPU_GUARDED(dense_dim_sparse));
  m.impl("_dimI", NPU_GUARDED(sparse_dim_sparse));
  m.impl("_dimV", NPU_GUARDED(dense_dim_sparse));
  m.impl("_nnz", NPU_GUARDED(_nnz_sparse));
  m.impl("is_coalesced", NPU_GUARDED(is_coalesced_sparse));
  m.impl("_coalesced_", NPU_GUARDED(_coalesced_sparse_));
  m.impl("sparse_resize_", NPU_GUARDED(sparse_resize_));
  m.impl("sparse_resize_and_clear_", NPU_GUARDED(sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", NPU_GUARDED(resize_as_sparse_));
  m.impl("copy_", NPU_GUARDED(copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", NPU_GUARDED(copy_sparse_));
  m.impl("clone", NPU_GUARDED(clone_sparse));
  m.impl("zero_", NPU_GUARDED(zero_sparse_));
  m.impl("_to_dense", NPU_GUARDED(cooToDense));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  using namespace at::native;
  m.impl("empty.memory_format", NPU_GUARDED(empty_sparse_compressed_symint));
  m.impl("empty_like", NPU_GUARDED(empty_like_sparse_csr));
  m.impl("crow_indices", NPU_GUARDED(crow_indices_sparse_csr));
  m.impl("col_indices", NPU_GUARDED(col_indices_sparse_csr));
  m.impl("ccol_indices", NPU_GUARDED(ccol_indices_sparse_csr));
  m.impl("row_indices", NPU_GUARDED(row_indices_sparse_csr));
  m.impl("values", NPU_GUARDED(values_sparse_csr));
  m.impl("sparse_dim", NPU_GUARDED(sparse_dim_sparse_csr));
  m.impl("dense_dim", NPU_GUARDED(dense_dim_sparse_csr));
  m.impl("_nnz", NPU_GUARDED(_nnz_sparse_csr));
  m.impl("resize_as_sparse_", NPU_GUARDED(resize_as_sparse_compressed_));
  m.impl("copy_", NPU_GUARDED(copy_sparse_compressed_));
  m.impl("clone", NPU_GUARDED(clone_sparse_compressed));
  m.impl("zero_", NPU_GUARDED(zero_sparse_csr_));
}

}  // namespace c10_npu::aten::sparse
