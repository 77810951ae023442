// Storage aliases (core/StorageAlias.h, Note [Storage aliases]): an alias
// shares its source's bytes, keeps them allocated after the source's last
// other reference goes, and reads and clears its source's poison marks.
#include <gtest/gtest.h>

#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include <memory>
#include <string>
#include <thread>

#include "core/NPUCachingAllocator.h"
#include "core/NPUStorageImpl.h"
#include "core/PoisonedMemory.h"
#include "core/StorageAlias.h"

namespace {

namespace alloc = c10_npu::NPUCachingAllocator;
namespace poison = c10_npu::poison;

constexpr c10::DeviceIndex kDevice = 0;

int64_t allocatedBytes() { return alloc::getDeviceStats(kDevice).allocated_bytes[0].current; }

c10::Storage npuStorage(size_t bytes) {
  return c10::Storage(c10_npu::makeNPUStorage(bytes, alloc::get()));
}

TEST(StorageAliasTest, SharesTheBytesAndNamesItsSource) {
  c10::Storage source = npuStorage(512);
  c10::Storage alias = c10_npu::makeStorageAlias(source);
  EXPECT_EQ(alias.data(), source.data());
  EXPECT_EQ(alias.nbytes(), 512u);
  EXPECT_EQ(alias.device(), source.device());
  EXPECT_FALSE(alias.resizable());
  EXPECT_NE(alias.unsafeGetStorageImpl(), source.unsafeGetStorageImpl());
  EXPECT_EQ(c10_npu::aliasSource(alias.unsafeGetStorageImpl()), source.unsafeGetStorageImpl());
  EXPECT_EQ(c10_npu::aliasSource(source.unsafeGetStorageImpl()), nullptr);
  EXPECT_EQ(c10_npu::aliasSource(nullptr), nullptr);
}

TEST(StorageAliasTest, KeepsTheMemoryUntilTheLastAliasGoes) {
  const int64_t before = allocatedBytes();
  c10::Storage alias;
  {
    c10::Storage source = npuStorage(4096);
    alias = c10_npu::makeStorageAlias(source);
  }
  EXPECT_GT(allocatedBytes(), before);  // the source's only reference is the alias's
  // The last reference may go on another thread (Note [Storages are freed on any thread]).
  std::thread([moved = std::move(alias)]() mutable { moved = c10::Storage(); }).join();
  EXPECT_EQ(allocatedBytes(), before);
}

TEST(StorageAliasTest, ReadsAndClearsTheSourcesPoison) {
  c10::Storage source = npuStorage(64);
  c10::Storage alias = c10_npu::makeStorageAlias(source);
  auto message = std::make_shared<const std::string>("task 'x' failed");
  poison::mark(source.getWeakStorageImpl(), message);
  EXPECT_EQ(poison::find(alias.unsafeGetStorageImpl()), message);
  EXPECT_THROW(poison::raiseIfPoisoned(alias.unsafeGetStorageImpl(), "read"), c10::Error);
  // A write of the whole alias is a write of the whole source.
  poison::clear(alias.unsafeGetStorageImpl());
  EXPECT_EQ(poison::find(source.unsafeGetStorageImpl()), nullptr);
  EXPECT_EQ(poison::find(alias.unsafeGetStorageImpl()), nullptr);
}

TEST(StorageAliasTest, AnAliasesOwnMarkComesFirstAndStaysItsOwn) {
  c10::Storage source = npuStorage(64);
  c10::Storage alias = c10_npu::makeStorageAlias(source);
  auto own = std::make_shared<const std::string>("own");
  poison::mark(alias.getWeakStorageImpl(), own);
  EXPECT_EQ(poison::find(alias.unsafeGetStorageImpl()), own);
  EXPECT_EQ(poison::find(source.unsafeGetStorageImpl()), nullptr);
  poison::clear(alias.unsafeGetStorageImpl());
  EXPECT_EQ(poison::find(alias.unsafeGetStorageImpl()), nullptr);
}

TEST(StorageAliasTest, RefusesAStorageOfAnotherDevice) {
  c10::Storage cpu(c10::Storage::use_byte_size_t(), 16, c10::GetCPUAllocator());
  EXPECT_THROW(c10_npu::makeStorageAlias(cpu), c10::Error);
}

}  // namespace
