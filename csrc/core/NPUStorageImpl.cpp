// See NPUStorageImpl.h and Note [Storages are freed on any thread].
#include "core/NPUStorageImpl.h"

#include <c10/util/Exception.h>

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

// c10 accepts one factory per device type and raises for a second one. A
// library load must not throw: if something else registered first, c10's
// make_storage_impl keeps using that one (our own factories still make
// NPUStorageImpl objects).
const bool kRegistered = [] {
  try {
    if (c10::GetStorageImplCreate(c10::DeviceType::PrivateUse1) == nullptr) {
      c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &makeNPUStorageImpl);
    }
  } catch (const c10::Error&) {
  }
  return true;
}();

}  // namespace

}  // namespace c10_npu
