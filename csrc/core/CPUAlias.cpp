// See CPUAlias.h.
#include "core/CPUAlias.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "core/NPUException.h"

namespace c10_npu {

at::Tensor cpuAlias(const at::Tensor& npu) {
  // Built directly rather than through at::from_blob: the generic op path
  // makes one alias per captured tensor per op on the calling thread, and
  // through from_blob `x + 1` on 16 elements took 6.2 µs of host time
  // instead of 3.5 µs (benchmarks/bench_torch.py). The alias shares the
  // storage's bytes (not owning them) and keeps the storage offset, sizes
  // and strides, and its conjugate and negative bits (Note [CPU aliases keep
  // the conj and neg bits]).
  const c10::Storage& source = npu.storage();
  at::Tensor alias;
  if (source.data() == nullptr) {
    alias = at::empty_strided(npu.sizes(), npu.strides(),
                              at::TensorOptions().dtype(npu.scalar_type()).device(at::kCPU));
  } else {
    // See Note [A CPU alias stays inside its storage].
    const size_t extent = at::detail::computeStorageNbytes(npu.sizes(), npu.strides(),
                                                           npu.itemsize(), npu.storage_offset());
    TORCH_CHECK(extent <= source.nbytes(), "npu tensor of sizes ", npu.sizes(), ", strides ",
                npu.strides(), ", storage offset ", npu.storage_offset(), " and dtype ",
                npu.scalar_type(), " needs ", extent, " bytes, but its storage has only ",
                source.nbytes(), NPU_ERROR_SUFFIX);
    // The alias's storage ends where the tensor does, so a kernel cannot
    // resize it into memory of the storage's other tensors.
    c10::Storage storage(c10::Storage::use_byte_size_t(), extent,
                         c10::DataPtr(const_cast<void*>(source.data()), c10::Device(c10::kCPU)),
                         /*allocator=*/nullptr, /*resizable=*/false);
    alias = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), npu.dtype());
    alias.unsafeGetTensorImpl()->set_sizes_and_strides(npu.sizes(), npu.strides(),
                                                       npu.storage_offset());
  }
  if (npu.is_conj()) alias._set_conj(true);
  if (npu.is_neg()) alias._set_neg(true);
  return alias;
}

}  // namespace c10_npu
