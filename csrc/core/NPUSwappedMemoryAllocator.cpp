// See NPUSwappedMemoryAllocator.h and Note [Swapped memory].
#include "core/NPUSwappedMemoryAllocator.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "npurt/npurt.h"

namespace c10_npu::NPUSwappedMemoryAllocator {
namespace {

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using HostMemory = std::unique_ptr<void, FreeDeleter>;

size_t pageSize() {
  static const size_t size = [] {
    const long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<size_t>(page) : size_t{4096};
  }();
  return size;
}

// Deleters run inside destructors and must not throw.
void release(void* ptr) noexcept {
  if (ptr == nullptr) return;  // an empty allocation (raw_deleter may be handed one)
  HostMemory memory(ptr);
  const npuError_t status = npuHostUnregister(ptr);
  if (status != npuSuccess) {
    // Still registered (mapped): keep the bytes rather than leave npurt a
    // range of freed memory.
    (void)memory.release();
    std::fprintf(stderr, "NPU swapped memory: npuHostUnregister(%p) failed: %s\n", ptr,
                 npuGetLastErrorMessage());
  }
}

class SwappedMemoryAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device device(c10::DeviceType::PrivateUse1, current_device());
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &release, device);
    const size_t page = pageSize();
    TORCH_CHECK_WITH(OutOfMemoryError, nbytes <= SIZE_MAX - page,
                     "Out of host memory for swapped memory. Tried to allocate ", nbytes, " bytes",
                     NPU_ERROR_SUFFIX);
    const size_t rounded = (nbytes + page - 1) / page * page;
    HostMemory memory(std::aligned_alloc(page, rounded));
    TORCH_CHECK_WITH(OutOfMemoryError, memory != nullptr,
                     "Out of host memory for swapped memory. Tried to allocate ", nbytes, " bytes",
                     NPU_ERROR_SUFFIX);
    NPU_CHECK(npuHostRegister(memory.get(), rounded, npuHostRegisterMapped));
    void* ptr = memory.release();  // the DataPtr owns it now
    return c10::DataPtr(ptr, ptr, &release, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) return;
    // As the device allocator's: see the work queued so far, then copy
    // (npurt takes mapped host memory as device memory).
    device_synchronize(current_device());
    NPU_CHECK(npuMemcpy(dest, src, count, npuMemcpyDeviceToDevice));
  }
};

}  // namespace

c10::Allocator* get() {
  // Leaked, as the other allocators: storages may be freed at exit.
  static SwappedMemoryAllocator* instance = std::make_unique<SwappedMemoryAllocator>().release();
  return instance;
}

}  // namespace c10_npu::NPUSwappedMemoryAllocator
