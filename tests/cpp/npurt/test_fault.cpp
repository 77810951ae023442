// Covers Note [Fault injection]: npuSetFaultInjection and NPU_SIM_FAULT. Each
// kind fails the n-th call (or task) of its kind counted from the arming,
// once; an injected task or asynchronous-copy fault is an ordinary task
// failure (Note [Task failure rule]): reported once, on its own stream, with
// the task's name; other streams are unaffected. Tests in one process run one
// after another, so the process-wide count sees only this test's calls.
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

class FaultTest : public NpurtTest {
 protected:
  uint64_t streamId(npuStream_t s) {
    uint64_t id = 0;
    EXPECT_NPU_OK(npuStreamGetId(s, &id));
    return id;
  }
};

bool messageHas(const std::string& text) {
  return std::string(npuGetLastErrorMessage()).find(text) != std::string::npos;
}

struct Counted {
  std::atomic<int> runs{0};
  std::atomic<int> releases{0};
};
int countedRun(void* u, char*, size_t) {
  static_cast<Counted*>(u)->runs++;
  return 0;
}
void countedRelease(void* u) { static_cast<Counted*>(u)->releases++; }

TEST_F(FaultTest, LaunchFaultFailsTheNthLaunchOnceWithoutEnqueuing) {
  auto s = makeStream();
  std::atomic<int> ran{0};
  Counted third;
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultLaunch, 3));
  ASSERT_NPU_OK(npuLaunchHostFunc(
      s.get(), [](void* u) { ++*static_cast<std::atomic<int>*>(u); },
      &ran));                                                       // 1
  ASSERT_NPU_OK(npurt::launch(s.get(), "second", [&] { ++ran; }));  // 2
  const npuTask task{"third", &countedRun, &countedRelease, &third, 0};
  EXPECT_NPU(npuErrorLaunchFailure, npuLaunchTask(s.get(), &task));  // 3
  EXPECT_TRUE(messageHas("npuLaunchTask: injected fault")) << npuGetLastErrorMessage();
  ASSERT_NPU_OK(npurt::launch(s.get(), "fourth", [&] { ++ran; }));  // one-shot
  EXPECT_NPU_OK(npuStreamSynchronize(s.get())) << "a launch fault is not a task failure";
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(third.runs.load(), 0);
  EXPECT_EQ(third.releases.load(), 0) << "a failed launch does not call release";
}

TEST_F(FaultTest, LaunchesOnBadHandlesDoNotCount) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultLaunch, 1));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuLaunchHostFunc(
                                                nullptr, [](void*) {}, nullptr));
  EXPECT_NPU(npuErrorLaunchFailure, npuLaunchHostFunc(
                                        s.get(), [](void*) {}, nullptr));
}

TEST_F(FaultTest, ZeroDisarms) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultLaunch, 1));
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultLaunch, 0));
  EXPECT_NPU_OK(npurt::launch(s.get(), "runs", [] {}));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(FaultTest, ExactlyOneOfManyConcurrentLaunchesFails) {
  auto s = makeStream();
  constexpr int kThreads = 4;
  constexpr int kEach = 500;
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultLaunch, 700));
  std::atomic<int> failures{0};
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        if (npurt::launch(s.get(), "many", [&] { ++ran; }) == npuErrorLaunchFailure) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(ran.load(), kThreads * kEach - 1);
}

TEST_F(FaultTest, TaskFaultIsAnOrdinaryTaskFailureOfItsStream) {
  auto s = makeStream(1);
  auto other = makeStream(1);
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));  // started before the arming: not counted
  ASSERT_TRUE(gate.waitStarted());
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultTask, 2));
  Counted first, second, third;
  const npuTask t1{"first", &countedRun, &countedRelease, &first, 0};
  const npuTask t2{"second", &countedRun, &countedRelease, &second, 0};
  const npuTask t3{"third", &countedRun, &countedRelease, &third, 0};
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &t1));
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &t2));
  ASSERT_NPU_OK(npuLaunchTask(s.get(), &t3));
  gate.open();
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  const std::string expected = "task 'second' failed on stream " +
                               std::to_string(streamId(s.get())) + " (device 1): injected fault";
  EXPECT_TRUE(messageHas(expected)) << npuGetLastErrorMessage();
  EXPECT_EQ(first.runs.load(), 1);
  EXPECT_EQ(second.runs.load(), 0) << "the injected fault replaces the run";
  EXPECT_EQ(second.releases.load(), 1) << "its release is still called";
  EXPECT_EQ(third.runs.load(), 0) << "discarded after the failure";
  EXPECT_EQ(third.releases.load(), 1);
  EXPECT_NPU_OK(npuStreamSynchronize(s.get())) << "reported once";
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npurt::launch(other.get(), "unaffected", [&] { ++ran; }));
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_report", [&] { ++ran; }));
  EXPECT_NPU_OK(npuStreamSynchronize(other.get()));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 2);
}

TEST_F(FaultTest, SynchronousCopyFaultReturnsLaunchFailureOnce) {
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 64));
  ASSERT_NPU_OK(npuMemset(d, 0x11, 64));
  std::vector<unsigned char> host(64, 0x22);
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultCopy, 2));
  ASSERT_NPU_OK(npuMemcpy(host.data(), d, 64, npuMemcpyDeviceToHost));  // 1
  EXPECT_NPU(npuErrorLaunchFailure, npuMemset(d, 0x33, 64));            // 2
  EXPECT_TRUE(messageHas("npuMemset: injected fault")) << npuGetLastErrorMessage();
  ASSERT_NPU_OK(npuMemcpy(host.data(), d, 64, npuMemcpyDeviceToHost));
  EXPECT_EQ(host, std::vector<unsigned char>(64, 0x11)) << "the failed memset wrote nothing";
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultCopy, 1));
  EXPECT_NPU(npuErrorLaunchFailure, npuMemcpy(d, host.data(), 64, npuMemcpyHostToDevice));
  ASSERT_NPU_OK(npuFree(d));
}

TEST_F(FaultTest, AsynchronousCopyFaultFailsWhenItRuns) {
  auto s = makeStream();
  auto other = makeStream();
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 64));
  ASSERT_NPU_OK(npuMemset(d, 0x11, 64));
  std::vector<unsigned char> host(64, 0x22);
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultCopy, 1));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d, 64, npuMemcpyDeviceToHost, s.get()));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_TRUE(messageHas("task 'npuMemcpyAsync' failed on stream " +
                         std::to_string(streamId(s.get())) + " (device 0): injected fault"))
      << npuGetLastErrorMessage();
  EXPECT_EQ(host, std::vector<unsigned char>(64, 0x22)) << "the failed copy wrote nothing";
  EXPECT_NPU_OK(npuStreamSynchronize(s.get())) << "reported once";
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultCopy, 1));
  ASSERT_NPU_OK(npuMemsetAsync(d, 0x44, 64, s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d, 64, npuMemcpyDeviceToHost, other.get()));
  EXPECT_NPU_OK(npuStreamSynchronize(other.get())) << "other streams are unaffected";
  EXPECT_EQ(host, std::vector<unsigned char>(64, 0x11));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_TRUE(messageHas("task 'npuMemsetAsync' failed")) << npuGetLastErrorMessage();
  ASSERT_NPU_OK(npuFree(d));
}

TEST_F(FaultTest, AllocFaultFailsTheNthMallocOnce) {
  size_t freeBefore = 0, total = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&freeBefore, &total));
  ASSERT_NPU_OK(npuSetFaultInjection(npuFaultAlloc, 2));
  void* a = nullptr;
  void* b = reinterpret_cast<void*>(0x1);
  void* c = nullptr;
  ASSERT_NPU_OK(npuMalloc(&a, 128));
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&b, 128));
  EXPECT_TRUE(messageHas("npuMalloc: injected fault")) << npuGetLastErrorMessage();
  ASSERT_NPU_OK(npuMalloc(&c, 128));
  ASSERT_NPU_OK(npuFree(a));
  ASSERT_NPU_OK(npuFree(c));
  size_t freeAfter = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&freeAfter, &total));
  EXPECT_EQ(freeAfter, freeBefore) << "the failed allocation took no capacity";
}

// An unknown kind (npuErrorInvalidValue) cannot be tested from C++: every
// value representable in npuFaultKind is valid, and any other is undefined
// behaviour in the caller (UBSan flags it); ctypes callers can pass one.

TEST(FaultEnvTest, EnvironmentArmsAFaultAtStart) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_FAULT", "alloc:2"}});
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_NPU_OK(npuMalloc(&a, 64));
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&b, 64));
  ASSERT_NPU_OK(npuMalloc(&b, 64));
  ASSERT_NPU_OK(npuFree(a));
  ASSERT_NPU_OK(npuFree(b));
}

TEST(FaultEnvTest, EnvironmentTaskFault) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_FAULT", "task:1"}});
  auto s = npurt::StreamHandle::create();
  ASSERT_NPU_OK(npurt::launch(s.get(), "env_fault", [] {}));
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronize(s.get()));
  EXPECT_TRUE(messageHas("task 'env_fault' failed")) << npuGetLastErrorMessage();
}

}  // namespace
}  // namespace npurt_test
