// See NPUStorageImpl.h and Note [Storages are freed on any thread].
#include "core/NPUStorageImpl.h"

#include <new>
#include <utility>

#include "npurt/npurt.h"

namespace c10_npu {

void* NPUStorageImpl::operator new(size_t size) {
  void* block = nullptr;
  if (npuTaskDataAlloc(&block, size) != npuSuccess || block == nullptr) throw std::bad_alloc();
  return block;
}

void NPUStorageImpl::operator delete(void* ptr, size_t size) noexcept {
  (void)npuTaskDataFree(ptr, size);  // accepts any thread, also after npurt shut down
}

c10::intrusive_ptr<c10::StorageImpl> makeNPUStorage(size_t size_bytes, c10::Allocator* allocator) {
  return c10::make_intrusive<NPUStorageImpl>(c10::StorageImpl::use_byte_size_t(), size_bytes,
                                             allocator, /*resizable=*/true);
}

c10::intrusive_ptr<c10::StorageImpl> makeNPUStorageImpl(
    c10::StorageImpl::use_byte_size_t use_byte_size, c10::SymInt size_bytes, c10::DataPtr data_ptr,
    c10::Allocator* allocator, bool resizable) {
  // c10::make_storage_impl passes an empty DataPtr when the storage is to
  // allocate its memory itself (as its own fallback does).
  if (data_ptr == nullptr) {
    return c10::make_intrusive<NPUStorageImpl>(use_byte_size, std::move(size_bytes), allocator,
                                               resizable);
  }
  return c10::make_intrusive<NPUStorageImpl>(use_byte_size, std::move(size_bytes),
                                             std::move(data_ptr), allocator, resizable);
}

namespace {

const bool kRegistered = [] {
  c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &makeNPUStorageImpl);
  return true;
}();

}  // namespace

}  // namespace c10_npu
