#include "core/NPUChangeDataPtr.h"

#include <c10/core/StorageImpl.h>

#include <memory>
#include <utility>

#include "core/HostSync.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"

namespace c10_npu {
namespace {

bool isNpuTensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

int64_t elementsOf(const c10::Storage& storage, const at::Tensor& t) {
  return static_cast<int64_t>(storage.nbytes() / t.element_size());
}

// The context of a pointer into another storage: a reference to that
// storage, so that its memory outlives every storage moved into it (Note
// [Storages moved into a combined buffer]).
void releaseBufferReference(void* context) {
  std::unique_ptr<c10::Storage> owned(static_cast<c10::Storage*>(context));
}

void checkArguments(const at::Tensor& dst, const at::Tensor& src, int64_t index) {
  TORCH_CHECK(isNpuTensor(dst) && isNpuTensor(src),
              "npu_change_data_ptr: expected dst and src to be npu tensors, but got dst on ",
              dst.defined() ? dst.device().str() : "an undefined tensor", " and src on ",
              src.defined() ? src.device().str() : "an undefined tensor", NPU_ERROR_SUFFIX);
  TORCH_CHECK(dst.device() == src.device(),
              "npu_change_data_ptr: expected dst and src on the same device, but got dst on ",
              dst.device(), " and src on ", src.device(), NPU_ERROR_SUFFIX);
  TORCH_CHECK(index >= 0, "Expect offset(index) equal or greater than zero, got: ", index,
              NPU_ERROR_SUFFIX);
  const c10::ScalarType type = src.scalar_type();
  TORCH_CHECK(type == dst.scalar_type(),
              "Expect src and dst tensors having the same dtype, got: src with dtype ", type,
              ", dst with dtype ", dst.scalar_type(), NPU_ERROR_SUFFIX);
  TORCH_CHECK(type == at::kHalf || type == at::kFloat || type == at::kBFloat16,
              "Only supports src and dst tensors with dtype float32, float16 or bfloat16, got: ",
              type, NPU_ERROR_SUFFIX);
  TORCH_CHECK(dst.has_storage() && src.has_storage(),
              "npu_change_data_ptr: dst and src must have storages (not sparse or meta tensors)",
              NPU_ERROR_SUFFIX);
  const int64_t dstSize = elementsOf(dst.storage(), dst);
  const int64_t srcSize = elementsOf(src.storage(), src);
  // torch_npu compares the offset in elements with the sizes in bytes, which
  // lets a dst run past src's end; this compares elements with elements.
  TORCH_CHECK(index <= srcSize && dstSize <= srcSize - index,
              "Offsets overflow, got: offset(index) ", index, ", dst storage size ", dstSize,
              ", src storage size ", srcSize, NPU_ERROR_SUFFIX);
}

}  // namespace

void changeDataPtr(const at::Tensor& dst, const at::Tensor& src, int64_t index) {
  checkArguments(dst, src, index);
  const c10::DeviceIndex device = dst.device().index();
  c10::StorageImpl* storage = dst.storage().unsafeGetStorageImpl();
  // The same storage passed the size check only at offset 0: nothing to do.
  if (storage == src.storage().unsafeGetStorageImpl()) return;

  // See Note [Storages moved into a combined buffer]: queued tasks may hold
  // this storage by reference unless the current stream owns its memory.
  const c10::DataPtr& old = storage->data_ptr();
  if (old.get() != nullptr &&
      !NPUCachingAllocator::isAllocatedOn(old, getCurrentNPUStream(device))) {
    noteHostSync("npu_change_data_ptr");
    device_synchronize(device);
  }

  auto* base = static_cast<char*>(src.storage().mutable_data());
  void* target = base + index * static_cast<int64_t>(src.element_size());
  auto reference = std::make_unique<c10::Storage>(src.storage());
  c10::DataPtr moved(target, reference.get(), &releaseBufferReference, dst.device());
  (void)reference.release();  // owned by `moved` from here
  // The old DataPtr is destroyed here: its memory goes back to its allocator.
  (void)storage->set_data_ptr(std::move(moved));
}

int64_t storageSize(const at::Tensor& t) {
  TORCH_CHECK(isNpuTensor(t), "get_storage_size: expected an npu tensor, but got a tensor on ",
              t.defined() ? t.device().str() : "nothing (undefined)", NPU_ERROR_SUFFIX);
  TORCH_CHECK(t.has_storage(), "get_storage_size: the tensor has no storage (a sparse tensor?)",
              NPU_ERROR_SUFFIX);
  return elementsOf(t.storage(), t);
}

}  // namespace c10_npu
