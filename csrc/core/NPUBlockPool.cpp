// Sizes of blocks and segments, and the raw events of the caching allocator.
// See Note [Allocator segments and splitting] in NPUBlockPool.h.
#include "core/NPUBlockPool.h"

#include <c10/util/llvmMathExtras.h>

#include <algorithm>

#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator::detail {

namespace {

// The power-of-two size class at or above `size` with `divisions` steps per
// power of two (Note [Power-of-two size classes]).
size_t nextDivision(size_t size, size_t divisions) {
  if (c10::llvm::isPowerOf2_64(size)) return size;
  const size_t floorPower = c10::llvm::PowerOf2Floor(size);
  const size_t step = floorPower / divisions;
  if (step == 0) return floorPower << 1;
  const size_t floor = size & ~(step - 1);
  return floor == size ? size : floor + step;
}

}  // namespace

size_t roundSize(size_t nbytes, const std::array<size_t, kRoundupPower2Intervals>& divisions) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  // Interval i holds [2^(20+i), 2^(21+i)): 1 MiB and below use the first.
  const size_t log2 = c10::llvm::Log2_64(nbytes);
  const size_t interval = std::min(log2 > 20 ? log2 - 20 : 0, kRoundupPower2Intervals - 1);
  const size_t n = divisions[interval];
  if (n > 1 && nbytes > kMinBlockSize * n) return nextDivision(nbytes, n);
  return (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segmentSize(size_t size, size_t largeSegment) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return largeSegment;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::shared_ptr<RawEvent> RawEvent::recordOn(npuStream_t handle) {
  auto event = std::make_shared<RawEvent>();
  npuEvent_t e = nullptr;
  NPU_CHECK(npuEventCreateWithFlags(&e, npuEventDisableTiming));
  event->handle_ = npurt::EventHandle(e);
  NPU_CHECK(npuEventRecord(e, handle));
  return event;
}

bool RawEvent::query() const {
  const npuError_t status = npuEventQuery(handle_.get());
  if (status == npuErrorNotReady) return false;
  NPU_CHECK(status);
  return true;
}

void RawEvent::synchronize() const { NPU_CHECK(npuEventSynchronize(handle_.get())); }

}  // namespace c10_npu::NPUCachingAllocator::detail
