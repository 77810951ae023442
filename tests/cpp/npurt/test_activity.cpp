// The activity log (npurt_activity.h): records of every task kind with
// device, stream, kind and times; external correlation ids read at enqueue;
// flush order and clearing; errors of the API.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "npurt/npurt.hpp"
#include "npurt/npurt_activity.h"
#include "test_util.h"

namespace npurt_test {
namespace {

struct Collected {
  npuActivityKind kind;
  int device;
  uint64_t stream;
  std::string name;
  uint32_t externalId;
  int failed;
  uint64_t enqueueNs, startNs, endNs;
};

std::vector<Collected> flushAll() {
  std::vector<Collected> out;
  EXPECT_NPU_OK(npuActivityFlush(
      [](const npuActivityRecord* r, void* user) {
        static_cast<std::vector<Collected>*>(user)->push_back(
            Collected{r->kind, r->device, r->stream, r->name, r->externalId, r->failed,
                      r->enqueueNs, r->startNs, r->endNs});
      },
      &out));
  return out;
}

uint64_t streamId(npuStream_t s) {
  uint64_t id = 0;
  EXPECT_NPU_OK(npuStreamGetId(s, &id));
  return id;
}

class ActivityTest : public NpurtTest {
 protected:
  void TearDown() override {
    (void)npuActivityDisable();
    (void)flushAll();
    NpurtTest::TearDown();
  }
};

TEST_F(ActivityTest, RecordsEveryKindOnItsStreamWithOrderedTimes) {
  auto s0 = makeStream(0);
  auto s1 = makeStream(0);
  auto ev = makeEvent();
  void* dev = nullptr;
  ASSERT_NPU_OK(npuMalloc(&dev, 256));
  std::vector<char> host(256);
  ASSERT_NPU_OK(npuActivityEnable());
  ASSERT_NPU_OK(npurt::launch(s0.get(), "kernel_a", [] {}));
  ASSERT_NPU_OK(npuMemsetAsync(dev, 1, 256, s0.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), dev, 256, npuMemcpyDeviceToHost, s0.get()));
  ASSERT_NPU_OK(npuEventRecord(ev.get(), s0.get()));
  ASSERT_NPU_OK(npuStreamWaitEvent(s1.get(), ev.get(), 0));
  ASSERT_NPU_OK(npuLaunchHostFunc(s1.get(), [](void*) {}, nullptr));
  ASSERT_NPU_OK(npuStreamSynchronize(s0.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  ASSERT_NPU_OK(npuActivityDisable());
  const std::vector<Collected> records = flushAll();
  ASSERT_NPU_OK(npuFree(dev));

  std::map<npuActivityKind, const Collected*> byKind;
  for (const Collected& r : records) byKind[r.kind] = &r;
  ASSERT_EQ(records.size(), 6u);
  const uint64_t id0 = streamId(s0.get());
  const uint64_t id1 = streamId(s1.get());
  EXPECT_EQ(byKind.at(npuActivityKindKernel)->name, "kernel_a");
  EXPECT_EQ(byKind.at(npuActivityKindKernel)->stream, id0);
  EXPECT_EQ(byKind.at(npuActivityKindMemset)->stream, id0);
  EXPECT_EQ(byKind.at(npuActivityKindMemcpy)->stream, id0);
  EXPECT_EQ(byKind.at(npuActivityKindEventRecord)->stream, id0);
  EXPECT_EQ(byKind.at(npuActivityKindEventWait)->stream, id1);
  EXPECT_EQ(byKind.at(npuActivityKindHostFunc)->stream, id1);
  for (const Collected& r : records) {
    EXPECT_EQ(r.device, 0);
    EXPECT_EQ(r.externalId, 0u) << r.name;
    EXPECT_EQ(r.failed, 0) << r.name;
    EXPECT_NE(r.enqueueNs, 0u) << r.name;
    EXPECT_LE(r.enqueueNs, r.startNs) << r.name;
    EXPECT_LE(r.startNs, r.endNs) << r.name;
  }
  // Stream order: each task of s0 starts after the previous one ended.
  EXPECT_LE(byKind.at(npuActivityKindKernel)->endNs, byKind.at(npuActivityKindMemset)->startNs);
  EXPECT_LE(byKind.at(npuActivityKindMemset)->endNs, byKind.at(npuActivityKindMemcpy)->startNs);
  // The wait on s1 completed after the record on s0.
  EXPECT_LE(byKind.at(npuActivityKindEventRecord)->startNs,
            byKind.at(npuActivityKindEventWait)->endNs);
  EXPECT_TRUE(flushAll().empty()) << "a flush discards what it handed over";
}

TEST_F(ActivityTest, ExternalIdIsTheEnqueuingThreadsAtEnqueue) {
  auto s = makeStream(0);
  ScopedGate gate;
  ASSERT_NPU_OK(npuActivityEnable());
  ASSERT_NPU_OK(gate.launchBlocker(s.get(), "blocker"));
  ASSERT_NPU_OK(npuActivityPushExternalCorrelationId(7));
  ASSERT_NPU_OK(npurt::launch(s.get(), "outer", [] {}));
  ASSERT_NPU_OK(npuActivityPushExternalCorrelationId(9));
  ASSERT_NPU_OK(npurt::launch(s.get(), "inner", [] {}));
  uint32_t popped = 0;
  ASSERT_NPU_OK(npuActivityPopExternalCorrelationId(&popped));
  EXPECT_EQ(popped, 9u);
  ASSERT_NPU_OK(npuActivityPopExternalCorrelationId(nullptr));
  // The tasks run after the ids were popped: the ids of their enqueue count.
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  std::map<std::string, uint32_t> ids;
  for (const Collected& r : flushAll()) ids[r.name] = r.externalId;
  EXPECT_EQ(ids.at("blocker"), 0u);
  EXPECT_EQ(ids.at("outer"), 7u);
  EXPECT_EQ(ids.at("inner"), 9u);
}

TEST_F(ActivityTest, NothingIsRecordedWhileDisabledAndEnableClears) {
  auto s = makeStream(1);
  ASSERT_NPU_OK(npurt::launch(s.get(), "before", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_TRUE(flushAll().empty());
  ASSERT_NPU_OK(npuActivityEnable());
  ASSERT_NPU_OK(npurt::launch(s.get(), "during", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuActivityEnable());  // discards "during"
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_restart", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuActivityDisable());
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_disable", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  const std::vector<Collected> records = flushAll();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name, "after_restart");
  EXPECT_EQ(records[0].device, 1);
}

TEST_F(ActivityTest, FailedTaskIsMarked) {
  auto s = makeStream(0);
  ASSERT_NPU_OK(npuActivityEnable());
  ASSERT_NPU_OK(npurt::launch(s.get(), "boom", [] { throw std::runtime_error("no"); }));
  EXPECT_NE(npuStreamSynchronize(s.get()), npuSuccess);
  const std::vector<Collected> records = flushAll();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].failed, 1);
}

TEST_F(ActivityTest, BadArguments) {
  EXPECT_EQ(npuActivityFlush(nullptr, nullptr), npuErrorInvalidValue);
  EXPECT_NE(std::strstr(npuGetLastErrorMessage(), "callback"), nullptr);
  EXPECT_EQ(npuActivityPushExternalCorrelationId(0), npuErrorInvalidValue);
  uint32_t id = 123;
  EXPECT_EQ(npuActivityPopExternalCorrelationId(&id), npuErrorIllegalState);
  EXPECT_EQ(id, 123u) << "a failed pop leaves *id alone";
}

}  // namespace
}  // namespace npurt_test
