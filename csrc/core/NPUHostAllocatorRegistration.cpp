// The pinned host allocator as PyTorch's at::HostAllocator for PrivateUse1,
// so that torch.accelerator.empty_host_cache() and the host-memory APIs that
// look the allocator up by device type find one (without it the lookup
// returned null and empty_host_cache crashed the process; torch.accelerator.
// Graph calls it on entry). A thin adapter over NPUHostAllocator.
#include <ATen/core/CachingHostAllocator.h>

#include "core/NPUCachingAllocator.h"
#include "core/NPUStream.h"

namespace c10_npu::NPUHostAllocator {
namespace {

// Thread-safe: every call forwards to the thread-safe NPUHostAllocator.
struct HostAllocatorAdapter final : public at::HostAllocator {
  c10::DataPtr allocate(size_t n) override { return get()->allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    get()->copy_data(dest, src, count);
  }
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream stream) override {
    recordEvent(ptr, NPUStream(stream));
    return true;
  }
  void empty_cache() override { emptyCache(); }
  at::HostStats get_stats() override {
    const HostStats s = stats();
    at::HostStats out;
    out.allocated_bytes.current = s.reserved_bytes;
    out.active_bytes.current = s.allocated_bytes;
    out.num_host_alloc = s.num_host_alloc;
    out.num_host_free = s.num_host_free;
    return out;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

HostAllocatorAdapter gAdapter;

}  // namespace
}  // namespace c10_npu::NPUHostAllocator

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &c10_npu::NPUHostAllocator::gAdapter)
