// NPUStorageImpl (core/NPUStorageImpl.h): npu storages from both factories
// (ours and c10's per-device one), and Note [Storages are freed on any
// thread]: a storage whose last reference goes on another thread than the
// one that made it frees its device memory exactly as before and leaves
// nothing corrupted.
#include <gtest/gtest.h>

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

#include "core/NPUCachingAllocator.h"
#include "core/NPUStorageImpl.h"

namespace {

namespace alloc = c10_npu::NPUCachingAllocator;
using c10_npu::NPUStorageImpl;

constexpr c10::DeviceIndex kDevice = 0;
const c10::Device kNpu(c10::DeviceType::PrivateUse1, kDevice);

int64_t allocatedBytes() { return alloc::getDeviceStats(kDevice).allocated_bytes[0].current; }

TEST(NPUStorageTest, MakeNPUStorageAllocatesFromTheAllocator) {
  const int64_t before = allocatedBytes();
  {
    auto storage = c10_npu::makeNPUStorage(1000, alloc::get());
    ASSERT_NE(dynamic_cast<NPUStorageImpl*>(storage.get()), nullptr);
    EXPECT_EQ(storage->nbytes(), 1000u);
    EXPECT_TRUE(storage->resizable());
    EXPECT_EQ(storage->allocator(), alloc::get());
    EXPECT_EQ(storage->device(), kNpu);
    ASSERT_NE(storage->data(), nullptr);
    EXPECT_GT(allocatedBytes(), before);
  }
  EXPECT_EQ(allocatedBytes(), before);
}

TEST(NPUStorageTest, ZeroBytesHaveNoMemory) {
  auto storage = c10_npu::makeNPUStorage(0, alloc::get());
  EXPECT_EQ(storage->nbytes(), 0u);
  EXPECT_EQ(storage->data(), nullptr);
}

TEST(NPUStorageTest, C10FactoryMakesNPUStoragesForTheDevice) {
  // Without a DataPtr: the storage allocates its memory itself.
  auto fresh = c10::make_storage_impl(c10::StorageImpl::use_byte_size_t(), 256, c10::DataPtr(),
                                      alloc::get(), /*resizable=*/false, kNpu);
  ASSERT_NE(dynamic_cast<NPUStorageImpl*>(fresh.get()), nullptr);
  EXPECT_EQ(fresh->nbytes(), 256u);
  EXPECT_FALSE(fresh->resizable());
  EXPECT_NE(fresh->data(), nullptr);

  // With one: the storage takes exactly that memory.
  c10::DataPtr memory = alloc::get()->allocate(128);
  void* const raw = memory.get();
  auto adopted = c10::make_storage_impl(c10::StorageImpl::use_byte_size_t(), 128, std::move(memory),
                                        alloc::get(), true, kNpu);
  ASSERT_NE(dynamic_cast<NPUStorageImpl*>(adopted.get()), nullptr);
  EXPECT_EQ(adopted->data(), raw);
  EXPECT_EQ(adopted->nbytes(), 128u);
}

// The executor pattern: the host makes a storage and a weak reference, drops
// its strong reference (the device memory goes back at once), and another
// thread drops the last weak reference, which frees the object there. The
// allocating thread reuses what the other thread freed, so every round also
// checks that a reused object comes back intact.
TEST(NPUStorageTest, StoragesDroppedLastOnAnotherThreadFreeEverything) {
  constexpr int kRounds = 20000;
  const int64_t before = allocatedBytes();
  std::vector<std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>>> handoff(kRounds);
  std::atomic<int> published{0};
  std::thread dropper([&] {
    for (int i = 0; i < kRounds; ++i) {
      while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      handoff[i].reset();
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    auto storage = c10_npu::makeNPUStorage(64 + (i % 7) * 8, alloc::get());
    ASSERT_EQ(storage->nbytes(), static_cast<size_t>(64 + (i % 7) * 8));
    ASSERT_EQ(storage.use_count(), 1u);
    handoff[i].emplace(storage);
    storage.reset();
    ASSERT_TRUE(handoff[i]->expired());
    published.store(i + 1, std::memory_order_release);
  }
  dropper.join();
  EXPECT_EQ(allocatedBytes(), before);
}

}  // namespace
