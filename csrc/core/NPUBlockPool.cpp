// Sizes of blocks and segments, and the raw events of the caching allocator.
// See Note [Allocator segments and splitting] in NPUBlockPool.h.
#include "core/NPUBlockPool.h"

#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator::detail {

size_t roundSize(size_t nbytes) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
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
