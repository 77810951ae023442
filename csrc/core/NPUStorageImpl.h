// c10_npu::NPUStorageImpl — the storage of every npu tensor.
//
// Layer: framework core. torch_npu has a class of this name too (it also
// carries a CANN storage format, which the simulated device does not have).
//
// Note [Storages are freed on any thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A queued task names the storages it reads and writes (TaskAccess in
// csrc/aten/OpLauncher.h) by weak references, so that their addresses are
// not reused while the task may still poison them (Note [Poisoned memory]).
// The task is released on the executor that ran it (Note [Tasks that hold
// only aliases are released where they ran]), and the output of `y = x + 1`
// is usually dropped by the program before that: the executor then drops the
// last reference and frees the StorageImpl object that the host thread
// allocated. With glibc's malloc such a free never returns to the
// allocating thread's cache: the host took every new storage from the
// arena's locked slow path and the executor freed into the same arena: about
// 0.15 us of a tiny op's 2.5 us (docs/PERFORMANCE.md, session 25). So npu
// storages live in npurt's cross-thread blocks (npuTaskDataAlloc), which
// return a block freed on an executor to the allocating threads without
// locks. Nothing else differs from c10::StorageImpl: same counts, same
// lifetime, same release of the device memory when the last strong reference
// goes.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/SymInt.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>

namespace c10_npu {

struct NPUStorageImpl final : public c10::StorageImpl {
  using c10::StorageImpl::StorageImpl;

  // Note [Storages are freed on any thread]. Throws std::bad_alloc.
  // Thread-safe.
  static void* operator new(size_t size);
  // Returns the object's block; any thread. Thread-safe.
  static void operator delete(void* ptr, size_t size) noexcept;
};

// The storage of a new npu tensor: `size_bytes` bytes from `allocator`.
// Thread-safe.
c10::intrusive_ptr<c10::StorageImpl> makeNPUStorage(size_t size_bytes, c10::Allocator* allocator);

// c10's factory for PrivateUse1 storages (c10::SetStorageImplCreate, which
// c10::make_storage_impl consults: Python's UntypedStorage, lazy clones,
// ...): an NPUStorageImpl over `data_ptr`, or over fresh memory from
// `allocator` when `data_ptr` is empty. Registered when the library loads.
// Thread-safe.
c10::intrusive_ptr<c10::StorageImpl> makeNPUStorageImpl(
    c10::StorageImpl::use_byte_size_t use_byte_size, c10::SymInt size_bytes, c10::DataPtr data_ptr,
    c10::Allocator* allocator, bool resizable);

}  // namespace c10_npu
