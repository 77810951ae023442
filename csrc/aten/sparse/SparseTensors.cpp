// See SparseTensors.h and Note [Sparse npu tensors].
#include "aten/sparse/SparseTensors.h"

#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/_validate_sparse_compressed_tensor_args.h>
#include <ATen/ops/_validate_sparse_coo_tensor_args.h>

#include "aten/OpLauncher.h"
#include "aten/SynchronousOp.h"
#include "core/NPUException.h"

namespace c10_npu::aten::sparse {
namespace {

bool isCoo(const at::Tensor& t) { return t.layout() == c10::kSparse; }

// A sparse tensor of `layout` and `sizes` over `parts` (see components()),
// on the parts' device.
at::Tensor assemble(c10::Layout layout, c10::IntArrayRef sizes,
                    const c10::SmallVector<at::Tensor, 3>& parts, bool coalesced) {
  if (layout == c10::kSparse) {
    const at::Tensor& indices = parts[0];
    const at::Tensor& values = parts[1];
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        indices.size(0), values.dim() - 1, sizes, indices, values,
        values.options().layout(c10::kSparse), coalesced);
  }
  return at::_sparse_compressed_tensor_unsafe(parts[0], parts[1], parts[2], sizes,
                                              parts[2].options().layout(layout));
}

}  // namespace

c10::SmallVector<at::Tensor, 3> components(const at::Tensor& sparse) {
  TORCH_CHECK(sparse.layout() != c10::kStrided, "expected a sparse tensor, got a strided one",
              NPU_ERROR_SUFFIX);
  if (isCoo(sparse)) return {sparse._indices(), sparse._values()};
  auto [compressed, plain] = at::sparse_csr::getCompressedPlainIndices(sparse);
  return {compressed, plain, sparse.values()};
}

at::Tensor cpuTwin(const at::Tensor& npu, bool copy) {
  c10::SmallVector<at::Tensor, 3> parts;
  for (const at::Tensor& c : components(npu)) {
    at::Tensor alias = cpuAlias(c);
    parts.push_back(copy ? alias.clone() : alias);
  }
  // CPU kernels trust these invariants (an index past the sizes is read or
  // written out of bounds); PyTorch checks them only on request.
  if (isCoo(npu)) {
    at::_validate_sparse_coo_tensor_args(parts[0], parts[1], npu.sizes());
  } else {
    at::_validate_sparse_compressed_tensor_args(parts[0], parts[1], parts[2], npu.sizes(),
                                                npu.layout());
  }
  return assemble(npu.layout(), npu.sizes(), parts, isCoo(npu) && npu.is_coalesced());
}

at::Tensor toNpu(const at::Tensor& cpu, const NPUStream& stream, c10::DeviceIndex device) {
  c10::SmallVector<at::Tensor, 3> parts;
  for (const at::Tensor& c : components(cpu))
    parts.push_back(detail::resultToNpu(c, stream, device));
  return assemble(cpu.layout(), cpu.sizes(), parts, isCoo(cpu) && cpu.is_coalesced());
}

void adopt(const at::Tensor& npu, const at::Tensor& cpu, const NPUStream& stream,
           c10::DeviceIndex device) {
  TORCH_CHECK(npu.layout() == cpu.layout(), "a kernel changed the layout of its sparse argument ",
              "from ", npu.layout(), " to ", cpu.layout(), NPU_ERROR_SUFFIX);
  const at::Tensor fresh = toNpu(cpu, stream, device);
  if (isCoo(npu)) {
    at::SparseTensorImpl* impl = at::sparse::get_sparse_impl(npu);
    // Metadata only: resize_ would resize the old components, which views
    // handed out by _indices() and _values() may still share.
    impl->raw_resize_(cpu.sparse_dim(), cpu.dense_dim(), cpu.sizes());
    impl->set_indices_and_values_unsafe(fresh._indices(), fresh._values());
    impl->set_coalesced(cpu.is_coalesced());
    return;
  }
  auto [compressed, plain] = at::sparse_csr::getCompressedPlainIndices(fresh);
  at::sparse_csr::get_sparse_csr_impl(npu)->set_member_tensors(compressed, plain, fresh.values(),
                                                               cpu.sizes());
}

}  // namespace c10_npu::aten::sparse
