// GoogleTest suite of the device caching allocator and the pinned host
// allocator (csrc/core/NPUCachingAllocator.h): same-stream reuse, the
// cross-stream reuse rule (record_stream / erase_stream, external streams
// destroyed while a block is alive), out-of-memory, statistics, empty_cache.
//
// Work on a stream is held back with a gate: a task, launched through the
// task queue as the framework launches ops, that blocks until the test opens
// the gate. Tests allocate on device 0 from the calling thread's current
// stream (the default stream).
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/NPUCachingAllocator.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"
#include "test_launch.h"

namespace {

namespace alloc = c10_npu::NPUCachingAllocator;
namespace host = c10_npu::NPUHostAllocator;
using c10_npu::NPUStream;

constexpr c10::DeviceIndex kDevice = 0;

// Holds back every task queued on a stream after it until open() (or the
// end of the scope, so a failing test never leaves a stream blocked).
class Gate {
 public:
  Gate() : future_(promise_.get_future().share()) {}
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }

  void blockStream(const NPUStream& stream) {
    auto owned = std::make_unique<std::shared_future<void>>(future_);
    npuTask task{};
    task.name = "test gate";
    task.run = [](void* user, char*, size_t) -> int {
      static_cast<std::shared_future<void>*>(user)->wait();
      return 0;
    };
    task.release = [](void* user) {
      std::unique_ptr<std::shared_future<void>> dying(static_cast<std::shared_future<void>*>(user));
    };
    task.userData = owned.release();  // queue::launch owns it from here, also on failure
    c10_npu::queue::launch(stream, task);
  }
  // As blockStream, launched directly on a raw handle, as the library that
  // owns an external stream would (the task queue refuses external streams
  // under PER_STREAM_QUEUE=1 in compat mode).
  void blockRawStream(npuStream_t stream) {
    npurt::check(npurt::launch(stream, "test gate", [f = future_] { f.wait(); }));
  }
  void open() {
    if (!opened_) {
      opened_ = true;
      promise_.set_value();
    }
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_;
  bool opened_ = false;
};

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c10_npu::device_synchronize(kDevice);
    alloc::emptyCache();
    alloc::resetPeakStats(kDevice);
    alloc::resetAccumulatedStats(kDevice);
  }
};

TEST_F(AllocatorTest, SameStreamReuseReturnsSamePointer) {
  c10::DataPtr a = alloc::allocate(1000, kDevice);
  ASSERT_NE(a.get(), nullptr);
  EXPECT_EQ(a.device(), c10::Device(c10::DeviceType::PrivateUse1, kDevice));
  void* p = a.get();
  a.clear();
  c10::DataPtr b = alloc::allocate(900, kDevice);  // same rounded size class
  EXPECT_EQ(b.get(), p);
}

TEST_F(AllocatorTest, ZeroBytesGiveNullptrOnTheRightDevice) {
  c10::DataPtr a = alloc::allocate(0, kDevice);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(a.device(), c10::Device(c10::DeviceType::PrivateUse1, kDevice));
  alloc::recordStream(a, c10_npu::getStreamFromPool(false, kDevice));  // no-op
}

// A free block larger than the request is split, not wasted (Note
// [Allocator segments and splitting]); the rest serves the next request.
TEST_F(AllocatorTest, LargeFreeBlockIsSplitForSmallerRequest) {
  c10::DataPtr big = alloc::allocate(size_t{8} << 20, kDevice);  // from a 20 MiB segment
  auto* p = static_cast<char*>(big.get());
  big.clear();
  c10::DataPtr first = alloc::allocate(size_t{2} << 20, kDevice);
  EXPECT_EQ(first.get(), p);
  c10::DataPtr second = alloc::allocate(size_t{5} << 20, kDevice);
  EXPECT_EQ(second.get(), p + (size_t{2} << 20));
  EXPECT_EQ(alloc::getDeviceStats(kDevice).segment[0].current, 1);
}

TEST_F(AllocatorTest, OtherStreamDoesNotReuseCachedBlock) {
  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  a.clear();
  NPUStream side = c10_npu::getStreamFromPool(false, kDevice);
  const NPUStream previous = c10_npu::getCurrentNPUStream(kDevice);
  c10_npu::setCurrentNPUStream(side);
  c10::DataPtr b = alloc::allocate(4096, kDevice);
  c10_npu::setCurrentNPUStream(previous);
  EXPECT_NE(b.get(), p);
}

TEST_F(AllocatorTest, RecordStreamDelaysReuseUntilStreamWorkFinished) {
  NPUStream side = c10_npu::getStreamFromPool(false, kDevice);
  Gate gate;
  gate.blockStream(side);

  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  alloc::recordStream(a, side);
  a.clear();
  c10::DataPtr b = alloc::allocate(4096, kDevice);
  EXPECT_NE(b.get(), p) << "reused while a task on the recorded stream still runs";

  gate.open();
  side.synchronize();
  c10::DataPtr c = alloc::allocate(4096, kDevice);
  EXPECT_EQ(c.get(), p) << "not reused after the recorded stream finished";
}

TEST_F(AllocatorTest, EraseStreamUndoesRecordStream) {
  NPUStream side = c10_npu::getStreamFromPool(false, kDevice);
  Gate gate;
  gate.blockStream(side);

  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  alloc::recordStream(a, side);
  alloc::eraseStream(a, side);
  a.clear();
  c10::DataPtr b = alloc::allocate(4096, kDevice);
  EXPECT_EQ(b.get(), p);
}

TEST_F(AllocatorTest, RecordOnAllocationStreamIsNoOp) {
  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  alloc::recordStream(a, c10_npu::getCurrentNPUStream(kDevice));
  a.clear();
  c10::DataPtr b = alloc::allocate(4096, kDevice);
  EXPECT_EQ(b.get(), p);
}

TEST_F(AllocatorTest, OutOfMemoryRaisesAndAllocatorRecovers) {
  c10::DataPtr cached = alloc::allocate(size_t{4} << 20, kDevice);
  cached.clear();
  ASSERT_EQ(alloc::getDeviceStats(kDevice).segment[0].current, 1);  // cached

  // More than the default 8 GiB capacity: the capacity check fails before
  // any memory is touched.
  try {
    (void)alloc::allocate(size_t{9} << 30, kDevice);
    FAIL() << "expected c10::OutOfMemoryError";
  } catch (const c10::OutOfMemoryError& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("NPU out of memory. Tried to allocate 9.00 GiB (NPU 0;"), std::string::npos)
        << what;
    EXPECT_NE(what.find("total capacity"), std::string::npos) << what;
    EXPECT_NE(what.find("reserved in total by PyTorch"), std::string::npos) << what;
  }
  alloc::DeviceStats s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.segment[0].current, 0) << "the retry releases the cache";
  EXPECT_EQ(s.reserved_bytes[0].current, 0);

  c10::DataPtr after = alloc::allocate(1 << 20, kDevice);
  EXPECT_NE(after.get(), nullptr);
  EXPECT_EQ(alloc::getDeviceStats(kDevice).allocation[0].current, 1);
}

// Exact statistics are tested in test_allocator_stats.cpp; this is the
// basic bookkeeping of one small segment.
TEST_F(AllocatorTest, StatsFollowAllocationsAndFrees) {
  c10::DataPtr a = alloc::allocate(1000, kDevice);  // rounded to 1024
  c10::DataPtr b = alloc::allocate(3000, kDevice);  // rounded to 3072
  alloc::DeviceStats s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.allocated_bytes[0].current, 4096);
  EXPECT_EQ(s.requested_bytes[0].current, 4000);
  EXPECT_EQ(s.reserved_bytes[0].current, int64_t{2} << 20);  // one small segment
  EXPECT_EQ(s.allocation[0].current, 2);
  EXPECT_EQ(s.allocation[0].allocated, 2);

  b.clear();
  s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.allocated_bytes[0].current, 1024);
  EXPECT_EQ(s.allocated_bytes[0].peak, 4096);
  EXPECT_EQ(s.allocated_bytes[0].freed, 3072);
  EXPECT_EQ(s.reserved_bytes[0].current, int64_t{2} << 20);
  // b merged with the segment's free rest: one inactive split block.
  EXPECT_EQ(s.inactive_split[0].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[0].current, (int64_t{2} << 20) - 1024);
  EXPECT_EQ(s.allocation[0].current, 1);

  alloc::resetPeakStats(kDevice);
  s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.allocated_bytes[0].peak, s.allocated_bytes[0].current);
  EXPECT_EQ(s.reserved_bytes[0].peak, s.reserved_bytes[0].current);

  alloc::resetAccumulatedStats(kDevice);
  EXPECT_EQ(alloc::getDeviceStats(kDevice).allocation[0].allocated, 0);
}

TEST_F(AllocatorTest, EmptyCacheReleasesCachedBlocksOnly) {
  c10::DataPtr kept = alloc::allocate(size_t{1} << 20, kDevice);
  c10::DataPtr dropped = alloc::allocate(size_t{3} << 20, kDevice);
  dropped.clear();
  size_t freeBefore = 0;
  size_t total = 0;
  {
    npurt::DeviceGuard device(kDevice);
    npurt::check(npuMemGetInfo(&freeBefore, &total));
  }
  alloc::emptyCache();
  size_t freeAfter = 0;
  {
    npurt::DeviceGuard device(kDevice);
    npurt::check(npuMemGetInfo(&freeAfter, &total));
  }
  EXPECT_EQ(freeAfter - freeBefore, size_t{20} << 20);  // the 3 MiB block's 20 MiB segment
  alloc::DeviceStats s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.segment[0].current, 1);  // the small segment of `kept`
  EXPECT_EQ(s.reserved_bytes[0].current, int64_t{2} << 20);
  EXPECT_EQ(s.allocated_bytes[0].current, int64_t{1} << 20);
}

TEST_F(AllocatorTest, CAllocatorUsesCurrentDeviceAndRawInterface) {
  c10::Allocator* a = alloc::get();
  ASSERT_EQ(a, c10::GetAllocator(c10::DeviceType::PrivateUse1));
  c10::DataPtr d = a->allocate(128);
  EXPECT_EQ(d.device(), c10::Device(c10::DeviceType::PrivateUse1, c10_npu::current_device()));
  void* raw = a->raw_allocate(256);
  ASSERT_NE(raw, nullptr);
  npurt::check(npuMemset(raw, 7, 256));
  c10::DataPtr copy = a->clone(raw, 256);
  unsigned char back[256];
  npurt::check(npuMemcpy(back, copy.get(), 256, npuMemcpyDeviceToHost));
  EXPECT_EQ(back[0], 7);
  EXPECT_EQ(back[255], 7);
  a->raw_deallocate(raw);
}

TEST_F(AllocatorTest, DestroyedExternalStreamIsNeverTouchedAndBlockIsReused) {
  npuStream_t ext = nullptr;
  {
    npurt::DeviceGuard device(kDevice);
    npurt::check(npuStreamCreate(&ext));
  }
  NPUStream es = c10_npu::getStreamFromExternal(ext, kDevice);
  Gate gate;
  gate.blockRawStream(ext);

  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  alloc::recordStream(a, es);
  npurt::check(npuStreamDestroy(ext));  // while the block is alive and the stream busy
  EXPECT_ANY_THROW(alloc::recordStream(a, es));
  a.clear();

  c10::DataPtr b = alloc::allocate(4096, kDevice);
  EXPECT_NE(b.get(), p) << "reused while the destroyed stream's work still runs";

  gate.open();
  c10_npu::device_synchronize(kDevice);  // covers destroyed streams still draining
  c10::DataPtr c = alloc::allocate(4096, kDevice);
  EXPECT_EQ(c.get(), p);
}

TEST_F(AllocatorTest, ExternalStreamDestroyedAfterFree) {
  npuStream_t ext = nullptr;
  {
    npurt::DeviceGuard device(kDevice);
    npurt::check(npuStreamCreate(&ext));
  }
  NPUStream es = c10_npu::getStreamFromExternal(ext, kDevice);
  Gate gate;
  gate.blockRawStream(ext);
  c10::DataPtr a = alloc::allocate(4096, kDevice);
  void* p = a.get();
  alloc::recordStream(a, es);
  a.clear();
  npurt::check(npuStreamDestroy(ext));
  c10::DataPtr b = alloc::allocate(4096, kDevice);
  EXPECT_NE(b.get(), p);
  gate.open();
  c10_npu::device_synchronize(kDevice);
  c10::DataPtr c = alloc::allocate(4096, kDevice);
  EXPECT_EQ(c.get(), p);
}

TEST_F(AllocatorTest, ConcurrentAllocateRecordFreeKeepsStatsConsistent) {
  const alloc::DeviceStats before = alloc::getDeviceStats(kDevice);
  constexpr int kThreads = 4;
  constexpr int kIterations = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      npurt::check(npuSetDevice(kDevice));
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<c10::DataPtr> live;
      for (int i = 0; i < kIterations; ++i) {
        live.push_back(alloc::allocate(512 * (1 + rng() % 64), kDevice));
        if (rng() % 3 == 0) {
          alloc::recordStream(live.back(), c10_npu::getStreamFromPool(false, kDevice));
        }
        if (live.size() > 8) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
      }
    });
  }
  for (auto& th : threads) th.join();
  c10_npu::device_synchronize(kDevice);
  alloc::emptyCache();
  const alloc::DeviceStats s = alloc::getDeviceStats(kDevice);
  EXPECT_EQ(s.allocated_bytes[0].current, before.allocated_bytes[0].current);
  EXPECT_EQ(s.active[0].current, before.active[0].current);
  EXPECT_EQ(s.inactive_split[0].current, 0);
  EXPECT_EQ(s.reserved_bytes[0].current, before.reserved_bytes[0].current);
  EXPECT_EQ(s.allocated_bytes[0].allocated - before.allocated_bytes[0].allocated,
            s.allocated_bytes[0].freed - before.allocated_bytes[0].freed);
}

// Regression: the out-of-memory retry must see pending blocks (freed with
// record_stream) that another thread's allocation has taken out of the
// pending list to query their events. It once found the list empty and
// raised a spurious out-of-memory error. Needs a small device (ctest runs it
// with NPU_SIM_MEMORY_MB=64): two big blocks do not fit at once. The other
// stream's work is a task that takes 20 ms of device time, so the retry has
// to wait for it while the other thread keeps polling the pending list; the
// outcome does not depend on timing, only how often the old race would hit.
TEST(AllocatorRaceTest, OutOfMemoryRetrySeesPendingBlocksOtherThreadsHold) {
  size_t free = 0;
  size_t total = 0;
  npurt::check(npuSetDevice(kDevice));
  npurt::check(npuMemGetInfo(&free, &total));
  if (total > (size_t{64} << 20)) GTEST_SKIP() << "needs NPU_SIM_MEMORY_MB=64";
  constexpr size_t kBig = size_t{40} << 20;
  const NPUStream side = c10_npu::getStreamFromPool(false, kDevice);
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    npurt::check(npuSetDevice(kDevice));
    while (!stop.load()) c10::DataPtr small = alloc::allocate(512, kDevice);
  });
  constexpr int kRounds = 10;
  int succeeded = 0;
  for (int round = 0; round < kRounds; ++round) {
    npu_core_test::launch(side, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    c10::DataPtr first = alloc::allocate(kBig, kDevice);
    alloc::recordStream(first, side);
    first.clear();  // pending until the side stream's task has run
    try {
      c10::DataPtr second = alloc::allocate(kBig, kDevice);
      ++succeeded;
    } catch (const c10::OutOfMemoryError& e) {
      ADD_FAILURE() << "round " << round << ": " << e.what_without_backtrace();
    }
  }
  stop = true;
  poller.join();
  EXPECT_EQ(succeeded, kRounds);
  c10_npu::device_synchronize(kDevice);
  alloc::emptyCache();
}

TEST(HostAllocatorTest, PinnedBlockReusedOnlyAfterEventCompleted) {
  host::emptyCache();
  c10::Allocator* pinned = host::get();
  NPUStream side = c10_npu::getStreamFromPool(false, kDevice);
  Gate gate;
  gate.blockStream(side);

  c10::DataPtr a = pinned->allocate(1000);
  EXPECT_EQ(a.device(), c10::Device(c10::DeviceType::CPU));
  void* p = a.get();
  EXPECT_TRUE(host::isPinnedPtr(p));
  EXPECT_TRUE(host::isPinnedPtr(static_cast<char*>(p) + 999));
  host::recordEvent(p, side);
  a.clear();
  c10::DataPtr b = pinned->allocate(1000);
  EXPECT_NE(b.get(), p);

  gate.open();
  side.synchronize();
  c10::DataPtr c = pinned->allocate(1000);
  EXPECT_EQ(c.get(), p);
}

TEST(HostAllocatorTest, SameSizeReuseAndIsPinnedPtr) {
  c10::Allocator* pinned = host::get();
  c10::DataPtr a = pinned->allocate(4096);
  void* p = a.get();
  a.clear();
  c10::DataPtr b = pinned->allocate(4000);
  EXPECT_EQ(b.get(), p);
  EXPECT_EQ(pinned->allocate(0).get(), nullptr);

  int onStack = 0;
  EXPECT_FALSE(host::isPinnedPtr(&onStack));
  EXPECT_FALSE(host::isPinnedPtr(nullptr));
  std::vector<char> buffer(1 << 16);
  npurt::check(npuHostRegister(buffer.data(), buffer.size(), 0));
  EXPECT_TRUE(host::isPinnedPtr(buffer.data() + 100));
  npurt::check(npuHostUnregister(buffer.data()));
  EXPECT_FALSE(host::isPinnedPtr(buffer.data() + 100));
}

}  // namespace
