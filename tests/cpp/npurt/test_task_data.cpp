// Covers npuTaskDataAlloc / npuTaskDataFree and npurt::makeTaskData: memory
// for a task's userData that is allocated on the launching thread and freed
// by the task's release on an executor (see npuTaskDataAlloc in npurt.h).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "npurt/npurt.hpp"
#include "test_util.h"

namespace npurt_test {
namespace {

bool alignedTo64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST_F(NpurtTest, TaskDataBlocksHoldTheirSizeAndAreAligned) {
  // Sizes in every pooled class, at class edges, and beyond the pool.
  const std::vector<size_t> sizes = {1,    63,   64,   65,   128,  200,
                                     1000, 1024, 4095, 4096, 4097, size_t{1} << 20};
  std::vector<void*> blocks;
  for (size_t size : sizes) {
    void* p = nullptr;
    ASSERT_NPU_OK(npuTaskDataAlloc(&p, size));
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(alignedTo64(p)) << size;
    std::memset(p, 0xab, size);  // the whole block is writable
    blocks.push_back(p);
  }
  EXPECT_EQ(std::set<void*>(blocks.begin(), blocks.end()).size(), blocks.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_NPU_OK(npuTaskDataFree(blocks[i], sizes[i]));
}

TEST_F(NpurtTest, TaskDataAllocRejectsBadArguments) {
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDataAlloc(nullptr, 16));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("ptr is NULL"), std::string::npos);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_NPU(npuErrorInvalidValue, npuTaskDataAlloc(&p, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("size must be > 0"), std::string::npos);
  EXPECT_NPU_OK(npuTaskDataFree(nullptr, 16));
  // A size no allocation can have: an error, not a wrapped-around small block.
  p = reinterpret_cast<void*>(0x1);
  EXPECT_NPU(npuErrorMemoryAllocation, npuTaskDataAlloc(&p, SIZE_MAX));
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find(std::to_string(SIZE_MAX)),
            std::string::npos);
}

// A task whose release frees its own userData, as op tasks do.
struct Payload {
  int value;
  std::atomic<int>* sum;
};

int addPayload(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  const auto* p = static_cast<const Payload*>(user);
  p->sum->fetch_add(p->value, std::memory_order_relaxed);
  return 0;
}

void freePayload(void* user) { npurt::TaskDataPtr<Payload> owned(static_cast<Payload*>(user)); }

void launchThenReallocate() {
  npuStream_t stream = nullptr;
  ASSERT_NPU_OK(npuStreamCreate(&stream));
  std::atomic<int> sum{0};
  constexpr int kTasks = 256;
  std::set<void*> launched;
  for (int i = 0; i < kTasks; ++i) {
    auto payload = npurt::makeTaskData<Payload>(Payload{i, &sum});
    launched.insert(payload.get());
    const npuTask task{"payload", &addPayload, &freePayload, payload.get(), 0u};
    ASSERT_NPU_OK(npuLaunchTask(stream, &task));
    (void)payload.release();  // released by the task now
  }
  ASSERT_NPU_OK(npuStreamSynchronize(stream));
  EXPECT_EQ(sum.load(), kTasks * (kTasks - 1) / 2);
  // Executors hand freed blocks back in batches of 64, so all but the last
  // partial batch of each executor thread is available again here.
  int reused = 0;
  std::vector<npurt::TaskDataPtr<Payload>> again;
  for (int i = 0; i < kTasks / 2; ++i) {
    again.push_back(npurt::makeTaskData<Payload>(Payload{i, &sum}));
    reused += launched.count(again.back().get()) != 0 ? 1 : 0;
  }
  EXPECT_GE(reused, 64);
  ASSERT_NPU_OK(npuStreamDestroy(stream));
}

TEST_F(NpurtTest, TaskDataFreedByExecutorsIsReusedByTheLaunchingThread) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer every block is malloc'd and freed (node_pool.h)";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "under AddressSanitizer every block is malloc'd and freed (node_pool.h)";
#endif
#endif
  // On a thread of its own: the test's main thread keeps blocks that earlier
  // tests freed there, which its next allocations would take first.
  std::thread launcher([] { launchThenReallocate(); });
  launcher.join();
}

TEST_F(NpurtTest, TaskDataOfAThreadThatExitedCanBeFreedAnywhere) {
  std::vector<void*> blocks(100, nullptr);
  std::thread producer([&] {
    for (void*& b : blocks) ASSERT_NPU_OK(npuTaskDataAlloc(&b, 300));
  });
  producer.join();
  for (void* b : blocks) EXPECT_NPU_OK(npuTaskDataFree(b, 300));
  // And a thread that frees, then exits, leaves its cache to the others.
  std::vector<void*> more(100, nullptr);
  for (void*& b : more) ASSERT_NPU_OK(npuTaskDataAlloc(&b, 300));
  std::thread releaser([&] {
    for (void* b : more) EXPECT_NPU_OK(npuTaskDataFree(b, 300));
  });
  releaser.join();
  void* p = nullptr;
  ASSERT_NPU_OK(npuTaskDataAlloc(&p, 300));
  EXPECT_NPU_OK(npuTaskDataFree(p, 300));
}

struct ThrowingInit {
  explicit ThrowingInit(int) { throw std::runtime_error("constructor failed"); }
};

TEST_F(NpurtTest, MakeTaskDataPropagatesTheConstructorsException) {
  EXPECT_THROW((void)npurt::makeTaskData<ThrowingInit>(1), std::runtime_error);
}

}  // namespace
}  // namespace npurt_test
