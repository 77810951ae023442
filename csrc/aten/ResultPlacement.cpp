// See Note [Results computed in place of the output] in ResultPlacement.h.
#include "aten/ResultPlacement.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>

namespace c10_npu::aten::detail {
namespace {

struct Slot {
  void* data;
  size_t nbytes;
  bool taken;
};

std::atomic<uint64_t> gPlaced{0};
std::atomic<uint64_t> gCopied{0};

// The output offered by the ResultPlacement alive on this thread, if any.
thread_local Slot* offered = nullptr;

// A placed result does not own the output's memory.
void releaseNothing(void* /*context*/) {}

// A distinct context, so that raw_allocate (which requires context == data
// and hands the memory to raw_deleter later) refuses a placed block with an
// error instead of letting PyTorch's deleter free device memory.
char placedContext;

// PyTorch's CPU allocator, with the offer in front. Everything but allocate
// is the wrapped allocator's.
class PlacingCPUAllocator final : public c10::Allocator {
 public:
  explicit PlacingCPUAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    Slot* s = offered;
    if (s != nullptr && !s->taken && s->nbytes == n) {
      s->taken = true;
      return {s->data, &placedContext, &releaseNothing, c10::Device(c10::kCPU)};
    }
    return base_->allocate(n);
  }

  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

// Installed when the library loads, over whatever CPU allocator is current
// then, with the default priority (a later SetCPUAllocator replaces it; the
// tasks then simply copy, see placedIn).
const bool installed = [] {
  static PlacingCPUAllocator placing(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&placing);
  return true;
}();

// The bytes a tensor's storage spans from its data pointer to its end.
std::pair<uintptr_t, uintptr_t> storageRange(const at::Tensor& t) {
  const auto begin = reinterpret_cast<uintptr_t>(t.storage().data());
  return {begin, begin + t.storage().nbytes()};
}

}  // namespace

ResultPlacement::ResultPlacement(const std::vector<at::Tensor>& outputs) {
  // One output only: a kernel that allocates two results of one size in
  // the other order would put each in the other's output, and copying the
  // first would overwrite the second.
  if (outputs.size() != 1) return;
  const at::Tensor& out = outputs.front();
  if (!out.defined() || !out.has_storage() || out.storage().nbytes() == 0) return;
  static thread_local Slot slot;
  slot = Slot{out.storage().mutable_data(), out.storage().nbytes(), false};
  offered = &slot;
}

ResultPlacement::~ResultPlacement() { offered = nullptr; }

bool placedIn(const at::Tensor& result, const at::Tensor& out) {
  return result.has_storage() && out.has_storage() &&
         result.const_data_ptr() == out.const_data_ptr() &&
         result.scalar_type() == out.scalar_type() && result.sizes() == out.sizes() &&
         result.strides() == out.strides() && result.is_conj() == out.is_conj() &&
         result.is_neg() == out.is_neg();
}

void copyUnlessPlaced(const at::Tensor& out, const at::Tensor& result) {
  if (placedIn(result, out)) {
    gPlaced.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  gCopied.fetch_add(1, std::memory_order_relaxed);
  if (result.has_storage() && out.has_storage()) {
    const auto [rb, re] = storageRange(result);
    const auto [ob, oe] = storageRange(out);
    if (rb < oe && ob < re) {  // scratch that took the output's memory
      out.copy_(result.clone());
      return;
    }
  }
  out.copy_(result);
}

PlacementCounts placementCounts() {
  return {gPlaced.load(std::memory_order_relaxed), gCopied.load(std::memory_order_relaxed)};
}

}  // namespace c10_npu::aten::detail
