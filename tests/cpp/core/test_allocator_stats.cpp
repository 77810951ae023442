// GoogleTest suite of the caching allocator's CUDA-style internals
// (whitebox): splitting and merging of segments, exact statistics, the
// per-process memory fraction, PYTORCH_NPU_ALLOC_CONF parsing and
// max_split_size, and private memory pools. The cross-stream rules are in
// test_allocator.cpp. All tests allocate on device 0 from the default stream.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <string>
#include <thread>

#include "core/NPUAllocatorConfig.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"

namespace {

namespace alloc = c10_npu::NPUCachingAllocator;
constexpr c10::DeviceIndex kDevice = 0;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr size_t kAll = 0;
constexpr size_t kSmall = 1;
constexpr size_t kLarge = 2;

class AllocatorStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c10_npu::device_synchronize(kDevice);
    alloc::emptyCache();
    alloc::resetPeakStats(kDevice);
    alloc::resetAccumulatedStats(kDevice);
    ASSERT_EQ(alloc::getDeviceStats(kDevice).reserved_bytes[kAll].current, 0)
        << "a test left memory allocated";
  }
  void TearDown() override {
    alloc::setAllocatorSettings("max_split_size_mb:" + std::to_string(SIZE_MAX / kMiB));
    alloc::setMemoryFraction(1.0, kDevice);
    alloc::emptyCache();
  }
  static alloc::DeviceStats stats() { return alloc::getDeviceStats(kDevice); }
};

TEST_F(AllocatorStatsTest, SmallRequestsShareOneSegmentAndMergeBack) {
  c10::DataPtr a = alloc::allocate(100, kDevice);  // 512 B
  c10::DataPtr b = alloc::allocate(700, kDevice);  // 1024 B
  c10::DataPtr c = alloc::allocate(512, kDevice);
  auto* base = static_cast<char*>(a.get());
  EXPECT_EQ(b.get(), base + 512);
  EXPECT_EQ(c.get(), base + 1536);
  alloc::DeviceStats s = stats();
  EXPECT_EQ(s.segment[kSmall].current, 1);
  EXPECT_EQ(s.reserved_bytes[kSmall].current, 2 * kMiB);
  EXPECT_EQ(s.allocated_bytes[kSmall].current, 2048);
  EXPECT_EQ(s.requested_bytes[kSmall].current, 1312);
  EXPECT_EQ(s.inactive_split[kSmall].current, 1);  // the segment's free rest
  EXPECT_EQ(s.inactive_split_bytes[kSmall].current, 2 * kMiB - 2048);
  EXPECT_EQ(s.num_device_alloc, 1);

  b.clear();  // a hole between a and c: a second inactive split block
  s = stats();
  EXPECT_EQ(s.inactive_split[kSmall].current, 2);
  EXPECT_EQ(s.inactive_split_bytes[kSmall].current, 2 * kMiB - 1024);
  a.clear();  // merges with the hole
  c.clear();  // merges everything: one whole free segment, releasable
  s = stats();
  EXPECT_EQ(s.inactive_split[kSmall].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kSmall].current, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].current, 0);
  EXPECT_EQ(s.allocation[kAll].allocated, 3);
  EXPECT_EQ(s.allocation[kAll].freed, 3);
  EXPECT_EQ(s.active[kAll].current, 0);
  EXPECT_EQ(s.requested_bytes[kAll].current, 0);
  c10::DataPtr whole = alloc::allocate(size_t{1} << 20, kDevice);  // fits the merged segment
  EXPECT_EQ(whole.get(), base);
  EXPECT_EQ(stats().num_device_alloc, 1);
}

TEST_F(AllocatorStatsTest, LargeRequestsUseTheDocumentedSegmentSizes) {
  // First: a fresh segment of its own, 12 MiB (else best fit would split
  // the 20 MiB segment's rest for it).
  c10::DataPtr big = alloc::allocate((size_t{11} << 20) + 1, kDevice);
  c10::DataPtr medium = alloc::allocate(size_t{3} << 20, kDevice);  // < 10 MiB: 20 MiB segment
  alloc::DeviceStats s = stats();
  EXPECT_EQ(s.segment[kLarge].current, 2);
  EXPECT_EQ(s.reserved_bytes[kLarge].current, 32 * kMiB);
  // The 12 MiB segment's rest (1 MiB - 512) is not worth a block: `big` gets
  // the whole segment, and allocated_bytes counts it (CUDA does the same).
  EXPECT_EQ(s.allocated_bytes[kLarge].current, 3 * kMiB + 12 * kMiB);
  EXPECT_EQ(s.requested_bytes[kLarge].current, 14 * kMiB + 1);
  EXPECT_EQ(s.reserved_bytes[kSmall].current, 0);
  EXPECT_EQ(s.inactive_split[kLarge].current, 1);  // only the 20 MiB segment's rest
  EXPECT_EQ(s.inactive_split_bytes[kLarge].current, 17 * kMiB);
  big.clear();
  medium.clear();
  alloc::emptyCache();
  s = stats();
  EXPECT_EQ(s.reserved_bytes[kAll].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].peak, 32 * kMiB);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(s.segment[kAll].freed, 2);
  EXPECT_EQ(s.num_sync_all_streams, 1);
}

TEST_F(AllocatorStatsTest, EmptyCacheKeepsSegmentsWithLiveBlocks) {
  c10::DataPtr kept = alloc::allocate(4096, kDevice);
  c10::DataPtr dropped = alloc::allocate(4096, kDevice);
  dropped.clear();
  alloc::emptyCache();
  alloc::DeviceStats s = stats();
  EXPECT_EQ(s.reserved_bytes[kAll].current, 2 * kMiB);  // not releasable: kept lives in it
  EXPECT_EQ(s.inactive_split_bytes[kAll].current, 2 * kMiB - 4096);
}

TEST_F(AllocatorStatsTest, MaxSplitSizeStopsSplittingAndIsReported) {
  EXPECT_EQ(stats().max_split_size, -1);  // unlimited, as CUDA reports it
  alloc::setAllocatorSettings("max_split_size_mb:32");
  EXPECT_EQ(stats().max_split_size, 32 * kMiB);
  c10::DataPtr big = alloc::allocate(size_t{40} << 20, kDevice);
  void* p = big.get();
  alloc::DeviceStats s = stats();
  EXPECT_EQ(s.oversize_allocations.current, 1);
  EXPECT_EQ(s.oversize_segments.current, 1);
  big.clear();
  EXPECT_EQ(stats().oversize_allocations.current, 0);
  // A request under the limit never takes (and splits) an oversize block.
  c10::DataPtr small = alloc::allocate(size_t{12} << 20, kDevice);
  EXPECT_NE(small.get(), p);
  // An oversize request takes it if less than 20 MiB are wasted.
  c10::DataPtr close = alloc::allocate(size_t{36} << 20, kDevice);
  EXPECT_EQ(close.get(), p);
}

TEST_F(AllocatorStatsTest, BadConfigurationsNameTheValue) {
  auto message = [](const std::string& conf) {
    try {
      (void)alloc::parseAllocatorConfig(conf);
    } catch (const c10::Error& e) {  // RuntimeError in Python, as torch_npu's parser
      EXPECT_EQ(dynamic_cast<const c10::ValueError*>(&e), nullptr);
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("max_split_size_mb:abc").find("'abc'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:10").find("too small, must be >= 20"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:1.5").find("1.5"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:x").find("'x'"), std::string::npos);
  EXPECT_NE(message("expandable_segments:maybe").find("'maybe'"), std::string::npos);
  EXPECT_NE(message("bogus_key:1").find("Unrecognized key 'bogus_key'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb").find("'max_split_size_mb'"), std::string::npos);
  EXPECT_NE(message("large_segment_size_mb:10").find("must be > 10 MB"), std::string::npos);
  EXPECT_NE(message("segment_size_mb:600").find("must be [20, 512]"), std::string::npos);
  EXPECT_NE(message("segment_size_mb:x").find("segment_size_mb is invalid"), std::string::npos);
  const alloc::AllocatorConfig c =
      alloc::parseAllocatorConfig(" max_split_size_mb:64 , garbage_collection_threshold:0.5,");
  EXPECT_EQ(c.maxSplitSize, size_t{64} << 20);
  EXPECT_DOUBLE_EQ(c.garbageCollectionThreshold, 0.5);
  // Page sizes: large_segment_size_mb wins over segment_size_mb; rounded to 2 MiB.
  EXPECT_EQ(alloc::parseAllocatorConfig("").expandableLargePageSize(), size_t{20} << 20);
  EXPECT_EQ(alloc::parseAllocatorConfig("segment_size_mb:128").expandableLargePageSize(),
            size_t{128} << 20);
  EXPECT_EQ(alloc::parseAllocatorConfig("segment_size_mb:128,large_segment_size_mb:64")
                .expandableLargePageSize(),
            size_t{64} << 20);
  EXPECT_EQ(alloc::parseAllocatorConfig("large_segment_size_mb:11").expandableLargePageSize(),
            size_t{12} << 20);
  EXPECT_EQ(alloc::parseAllocatorConfig("large_segment_size_mb:11").largeSegmentSize,
            size_t{11} << 20);
  // c10's pinned-memory thresholds: MiB, unlimited by default.
  EXPECT_EQ(alloc::parseAllocatorConfig("").pinnedMaxCachedSize, SIZE_MAX);
  const alloc::AllocatorConfig pinned =
      alloc::parseAllocatorConfig("pinned_max_round_threshold_mb:64,pinned_max_cached_size_mb:128");
  EXPECT_EQ(pinned.pinnedMaxRoundThreshold, size_t{64} << 20);
  EXPECT_EQ(pinned.pinnedMaxCachedSize, size_t{128} << 20);
  EXPECT_NE(message("pinned_max_cached_size_mb:1.5").find("'1.5'"), std::string::npos);
  EXPECT_NE(message("pin_memory_expandable_segments:yes").find("'yes'"), std::string::npos);
  // A bad setting leaves the configuration in force unchanged.
  alloc::setAllocatorSettings("max_split_size_mb:64");
  EXPECT_THROW(alloc::setAllocatorSettings("max_split_size_mb:64,bogus:1"), c10::Error);
  EXPECT_EQ(alloc::allocatorConfig().maxSplitSize, size_t{64} << 20);
}

TEST_F(AllocatorStatsTest, MemoryFractionIsEnforced) {
  const auto [free, total] = alloc::memGetInfo(kDevice);
  ASSERT_GT(total, size_t{0});
  EXPECT_DOUBLE_EQ(alloc::getMemoryFraction(kDevice), 1.0);
  EXPECT_THROW(alloc::setMemoryFraction(1.5, kDevice), c10::ValueError);
  EXPECT_THROW(alloc::setMemoryFraction(-0.1, kDevice), c10::ValueError);
  const double fraction = static_cast<double>(64 * kMiB) / static_cast<double>(total);
  alloc::setMemoryFraction(fraction, kDevice);
  EXPECT_DOUBLE_EQ(alloc::getMemoryFraction(kDevice), fraction);
  c10::DataPtr fits = alloc::allocate(size_t{40} << 20, kDevice);
  try {
    (void)alloc::allocate(size_t{30} << 20, kDevice);
    FAIL() << "expected c10::OutOfMemoryError";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("per-process memory fraction"),
              std::string::npos);
  }
  EXPECT_EQ(stats().num_ooms, 1);
  fits.clear();
  c10::DataPtr now = alloc::allocate(size_t{30} << 20, kDevice);  // the retry released fits
  EXPECT_NE(now.get(), nullptr);
}

TEST_F(AllocatorStatsTest, GarbageCollectionReleasesUnusedSegmentsBeforeTheLimit) {
  const auto [free, total] = alloc::memGetInfo(kDevice);
  alloc::setMemoryFraction(static_cast<double>(100 * kMiB) / static_cast<double>(total), kDevice);
  alloc::setAllocatorSettings("garbage_collection_threshold:0.5");
  // 40 MiB cached, then a 50 MiB request (which the cached block cannot
  // serve) would take reserved past 50 MiB: the cached segment is collected
  // first, so no out-of-memory retry is needed.
  c10::DataPtr old = alloc::allocate(size_t{40} << 20, kDevice);
  old.clear();
  c10::DataPtr next = alloc::allocate(size_t{50} << 20, kDevice);
  const alloc::DeviceStats s = stats();
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(s.reserved_bytes[kAll].current, 50 * kMiB);
  EXPECT_EQ(s.num_device_free, 1);
  alloc::setAllocatorSettings("garbage_collection_threshold:0.99");
}

TEST_F(AllocatorStatsTest, OneExaByteIsRefusedLikeTorchNpu) {
  try {
    (void)alloc::allocate(size_t{1} << 60, kDevice);
    FAIL() << "expected c10::OutOfMemoryError";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what_without_backtrace())
                  .find("NPU out of memory. Tried to allocate more than 1EB memory."),
              std::string::npos);
  }
}

TEST_F(AllocatorStatsTest, RawAllocAndDelete) {
  void* p = alloc::rawAlloc(1000, c10_npu::getCurrentNPUStream(kDevice));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(stats().allocated_bytes[kAll].current, 1024);
  alloc::rawDelete(p);
  EXPECT_EQ(stats().allocated_bytes[kAll].current, 0);
  EXPECT_THROW(alloc::rawDelete(p), c10::Error);  // not live any more
}

TEST_F(AllocatorStatsTest, DeviceAllocatorInterfaceIsRegistered) {
  c10::DeviceAllocator* a = c10::getDeviceAllocator(c10::DeviceType::PrivateUse1);
  ASSERT_EQ(a, alloc::get());
  EXPECT_TRUE(a->initialized());
  c10::DataPtr d = a->allocate(4096);
  EXPECT_EQ(a->getDeviceStats(kDevice).allocated_bytes[kAll].current, 4096);
  const auto [free, total] = a->getMemoryInfo(kDevice);
  EXPECT_LE(free, total);
  d.clear();
  a->emptyCache();
  EXPECT_EQ(a->getDeviceStats(kDevice).reserved_bytes[kAll].current, 0);
}

// --- private pools (Note [Private memory pools]) ---

TEST_F(AllocatorStatsTest, PoolBlocksAreNeverHandedToOtherAllocations) {
  const c10::MempoolId_t id = alloc::newMempoolId();
  const auto self = std::this_thread::get_id();
  alloc::beginAllocateToPool(kDevice, id, [self](const c10_npu::NPUStream&) {
    return std::this_thread::get_id() == self;
  });
  EXPECT_EQ(alloc::getPoolUseCount(kDevice, id), 1);
  c10::DataPtr inPool = alloc::allocate(4096, kDevice);
  void* p = inPool.get();
  // Another thread (not routed) gets its own segment.
  c10::DataPtr other;
  std::thread([&] { other = alloc::allocate(4096, kDevice); }).join();
  EXPECT_NE(other.get(), nullptr);
  alloc::endAllocateToPool(kDevice, id);
  inPool.clear();
  c10::DataPtr outside = alloc::allocate(4096, kDevice);  // not routed: must not take p
  EXPECT_NE(outside.get(), p);
  EXPECT_EQ(stats().segment[kAll].current, 2);
  // Routed again: the pool's free block comes back.
  alloc::beginAllocateToPool(kDevice, id, [](const c10_npu::NPUStream&) { return true; });
  c10::DataPtr again = alloc::allocate(4096, kDevice);
  EXPECT_EQ(again.get(), p);
  alloc::endAllocateToPool(kDevice, id);
  EXPECT_EQ(alloc::getPoolUseCount(kDevice, id), 2);
  alloc::releasePool(kDevice, id);
  alloc::releasePool(kDevice, id);
  EXPECT_EQ(alloc::getPoolUseCount(kDevice, id), 0);
  // Still allocated from the released pool: it returns to the pool, whose
  // segment empty_cache then frees.
  again.clear();
  other.clear();
  outside.clear();
  alloc::emptyCache();
  EXPECT_EQ(stats().reserved_bytes[kAll].current, 0);
}

TEST_F(AllocatorStatsTest, PoolIsKeptByItsUsersAndEmptiedById) {
  const c10::MempoolId_t id = alloc::newMempoolId();
  alloc::createOrIncrefPool(kDevice, id);  // e.g. a MemPool object
  alloc::beginAllocateToPool(kDevice, id, [](const c10_npu::NPUStream&) { return true; });
  c10::DataPtr a = alloc::allocate(size_t{3} << 20, kDevice);
  alloc::endAllocateToPool(kDevice, id);
  alloc::releasePool(kDevice, id);
  a.clear();
  alloc::emptyCache();  // the pool is still used: its segment stays
  EXPECT_EQ(stats().reserved_bytes[kAll].current, 20 * kMiB);
  alloc::emptyCache(id);  // this pool's free segments only
  EXPECT_EQ(stats().reserved_bytes[kAll].current, 0);
  EXPECT_EQ(alloc::getPoolUseCount(kDevice, id), 1);
  alloc::releasePool(kDevice, id);
  EXPECT_EQ(alloc::getPoolUseCount(kDevice, id), 0);
}

TEST_F(AllocatorStatsTest, PoolRoutingFollowsTheStreamFilterNewestFirst) {
  const c10::MempoolId_t graphPool = alloc::newMempoolId();
  const c10_npu::NPUStream capturing = c10_npu::getStreamFromPool(false, kDevice);
  // As a graph capture would: only the capturing stream's allocations.
  alloc::beginAllocateToPool(kDevice, graphPool,
                             [capturing](const c10_npu::NPUStream& s) { return s == capturing; });
  c10::DataPtr captured = alloc::allocateOnStream(4096, capturing);
  c10::DataPtr notCaptured = alloc::allocate(4096, kDevice);  // default stream
  captured.clear();
  notCaptured.clear();
  EXPECT_EQ(stats().segment[kAll].current, 2);  // one per pool
  alloc::endAllocateToPool(kDevice, graphPool);
  EXPECT_THROW(alloc::endAllocateToPool(kDevice, graphPool), c10::Error);
  alloc::releasePool(kDevice, graphPool);
  EXPECT_THROW(alloc::releasePool(kDevice, graphPool), c10::Error);
  EXPECT_THROW(alloc::createOrIncrefPool(kDevice, {0, 0}), c10::Error);
}

}  // namespace
