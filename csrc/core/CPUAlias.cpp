// See CPUAlias.h.
#include "core/CPUAlias.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <type_traits>

#include "core/NPUException.h"

namespace c10_npu {

namespace {

// The bytes from the storage's start that `npu` reaches, checked against the
// storage. See Note [A CPU alias stays inside its storage].
size_t checkedExtent(const at::Tensor& npu) {
  const c10::Storage& source = npu.storage();
  const size_t extent = at::detail::computeStorageNbytes(npu.sizes(), npu.strides(), npu.itemsize(),
                                                         npu.storage_offset());
  TORCH_CHECK(extent <= source.nbytes(), "npu tensor of sizes ", npu.sizes(), ", strides ",
              npu.strides(), ", storage offset ", npu.storage_offset(), " and dtype ",
              npu.scalar_type(), " needs ", extent, " bytes, but its storage has only ",
              source.nbytes(), NPU_ERROR_SUFFIX);
  return extent;
}

// The alias itself. Built directly rather than through at::from_blob: the
// generic op path makes one alias per captured tensor per op, and through
// from_blob `x + 1` on 16 elements took 6.2 µs of host time instead of
// 3.5 µs (benchmarks/bench_torch.py). The alias shares the bytes (not owning
// them); its storage ends where the tensor does, so a kernel cannot resize
// it into memory of the storage's other tensors.
c10::Storage aliasStorage(void* data, size_t extent) {
  return c10::Storage(c10::Storage::use_byte_size_t(), extent,
                      c10::DataPtr(data, c10::Device(c10::kCPU)),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

at::Tensor makeAliasOn(c10::Storage storage, caffe2::TypeMeta dtype, c10::IntArrayRef sizes,
                       c10::IntArrayRef strides, int64_t offset, bool conj, bool neg) {
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  // See Note [CPU aliases keep the conj and neg bits].
  if (conj) alias._set_conj(true);
  if (neg) alias._set_neg(true);
  return alias;
}

at::Tensor makeAlias(void* data, size_t extent, caffe2::TypeMeta dtype, c10::IntArrayRef sizes,
                     c10::IntArrayRef strides, int64_t offset, bool conj, bool neg) {
  return makeAliasOn(aliasStorage(data, extent), dtype, sizes, strides, offset, conj, neg);
}

}  // namespace

void SharedStorageAliases::note(const at::Tensor& npu) {
  if (!npu.has_storage() || npu.storage().data() == nullptr) return;
  const c10::StorageImpl* impl = npu.storage().unsafeGetStorageImpl();
  const size_t extent = checkedExtent(npu);
  for (Shared& s : storages_) {
    if (s.npu == impl) {
      s.extent = std::max(s.extent, extent);
      return;
    }
  }
  storages_.push_back(Shared{impl, extent, c10::Storage()});
}

at::Tensor SharedStorageAliases::alias(const at::Tensor& npu) {
  if (!npu.has_storage() || npu.storage().data() == nullptr) return cpuAlias(npu);
  const c10::StorageImpl* impl = npu.storage().unsafeGetStorageImpl();
  for (Shared& s : storages_) {
    if (s.npu != impl) continue;
    TORCH_INTERNAL_ASSERT(checkedExtent(npu) <= s.extent, "an npu tensor was not noted");
    if (!s.cpu) s.cpu = aliasStorage(const_cast<void*>(npu.storage().data()), s.extent);
    return makeAliasOn(s.cpu, npu.dtype(), npu.sizes(), npu.strides(), npu.storage_offset(),
                       npu.is_conj(), npu.is_neg());
  }
  TORCH_INTERNAL_ASSERT(false, "SharedStorageAliases::alias of a tensor that was not noted");
}

at::Tensor cpuAlias(const at::Tensor& npu) {
  const c10::Storage& source = npu.storage();
  if (source.data() == nullptr) {
    at::Tensor alias = at::empty_strided(
        npu.sizes(), npu.strides(), at::TensorOptions().dtype(npu.scalar_type()).device(at::kCPU));
    if (npu.is_conj()) alias._set_conj(true);
    if (npu.is_neg()) alias._set_neg(true);
    return alias;
  }
  return makeAlias(const_cast<void*>(source.data()), checkedExtent(npu), npu.dtype(), npu.sizes(),
                   npu.strides(), npu.storage_offset(), npu.is_conj(), npu.is_neg());
}

static_assert(std::is_trivially_copyable_v<AliasSnapshot>);

bool AliasSnapshot::possible(const at::Tensor& npu) noexcept {
  return npu.has_storage() && npu.storage().data() != nullptr &&
         static_cast<size_t>(npu.dim()) <= kMaxDims;
}

// The arrays are filled up to dim_ only.
// NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init)
AliasSnapshot::AliasSnapshot(const at::Tensor& npu)
    : data_(const_cast<void*>(npu.storage().data())),
      extent_(checkedExtent(npu)),
      offset_(npu.storage_offset()),
      dtype_(npu.dtype()),
      dim_(static_cast<uint8_t>(npu.dim())),
      conj_(npu.is_conj()),
      neg_(npu.is_neg()) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(possible(npu));
  const c10::IntArrayRef sizes = npu.sizes();
  const c10::IntArrayRef strides = npu.strides();
  std::copy(sizes.begin(), sizes.end(), sizes_);
  std::copy(strides.begin(), strides.end(), strides_);
}

at::Tensor AliasSnapshot::alias() const {
  return makeAlias(data_, extent_, dtype_, c10::IntArrayRef(sizes_, dim_),
                   c10::IntArrayRef(strides_, dim_), offset_, conj_, neg_);
}

}  // namespace c10_npu
