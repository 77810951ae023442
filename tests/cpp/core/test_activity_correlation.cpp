// Note [Correlation through the task queue]: while a profiler collects, a
// task launched through the task queue carries the correlation id of the
// thread that launched it, not of the queue's consumer thread that calls
// npurt; while none collects, it carries none. Runs in every queue mode the
// CTest entries give it (the default here).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/ActivityCorrelation.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "npurt/npurt.h"
#include "npurt/npurt_activity.h"
#include "test_launch.h"

namespace {

using c10_npu::NPUStream;

std::map<std::string, uint32_t> flushIds() {
  std::map<std::string, uint32_t> ids;
  EXPECT_EQ(npuActivityFlush(
                [](const npuActivityRecord* r, void* user) {
                  (*static_cast<std::map<std::string, uint32_t>*>(user))[r->name] = r->externalId;
                },
                &ids),
            npuSuccess);
  return ids;
}

class ActivityCorrelationTest : public ::testing::Test {
 protected:
  void TearDown() override {
    c10_npu::profiler::setCollecting(false);
    (void)npuActivityDisable();
    (void)flushIds();
  }
};

TEST_F(ActivityCorrelationTest, TasksCarryTheLaunchingThreadsId) {
  const NPUStream s = c10_npu::getStreamFromPool(false, 0);
  ASSERT_EQ(npuActivityEnable(), npuSuccess);
  c10_npu::profiler::setCollecting(true);
  std::thread a([&] {
    c10_npu::profiler::pushId(11);
    npu_core_test::launch(s, [] {}, "from_a");
    c10_npu::profiler::popId();
  });
  a.join();
  std::thread b([&] {
    c10_npu::profiler::pushId(21);
    c10_npu::profiler::pushId(22);  // nested: the innermost counts
    npu_core_test::launch(s, [] {}, "from_b");
    c10_npu::profiler::popId();
    npu_core_test::launch(s, [] {}, "from_b_outer");
    c10_npu::profiler::popId();
    npu_core_test::launch(s, [] {}, "from_b_none");
  });
  b.join();
  s.synchronize();
  const auto ids = flushIds();
  EXPECT_EQ(ids.at("from_a"), 11u);
  EXPECT_EQ(ids.at("from_b"), 22u);
  EXPECT_EQ(ids.at("from_b_outer"), 21u);
  EXPECT_EQ(ids.at("from_b_none"), 0u);
}

TEST_F(ActivityCorrelationTest, NoIdWhileNotCollecting) {
  const NPUStream s = c10_npu::getStreamFromPool(false, 0);
  ASSERT_EQ(npuActivityEnable(), npuSuccess);  // npurt records, the queue does not carry ids
  c10_npu::profiler::pushId(5);
  npu_core_test::launch(s, [] {}, "not_collecting");
  c10_npu::profiler::popId();
  s.synchronize();
  EXPECT_EQ(flushIds().at("not_collecting"), 0u);
}

}  // namespace
