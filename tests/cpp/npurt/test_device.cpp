// Covers devices: the default device count, the per-host-thread current
// device, device properties, memory info, bad ordinals, device-wide
// synchronisation (including destroyed streams that are still draining) and
// npurt::DeviceGuard, device utilization. Runs with the default configuration (2 devices, 2 cores,
// 8192 MB); see tests/cpp/README.md.
#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "npurt/npurt_debug.h"
#include "test_util.h"

namespace npurt_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class DeviceTest : public NpurtTest {};

TEST_F(DeviceTest, DefaultConfigurationHasTwoDevices) {
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  EXPECT_EQ(count, 2);
}

TEST_F(DeviceTest, CurrentDeviceDefaultsToZero) {
  int device = -1;
  std::thread([&] { EXPECT_NPU_OK(npuGetDevice(&device)); }).join();
  EXPECT_EQ(device, 0);
}

TEST_F(DeviceTest, CurrentDeviceIsPerHostThread) {
  ASSERT_NPU_OK(npuSetDevice(1));
  int other = -1;
  int afterOtherSet = -1;
  std::thread([&] {
    EXPECT_NPU_OK(npuGetDevice(&other));
    EXPECT_NPU_OK(npuSetDevice(1));
    EXPECT_NPU_OK(npuSetDevice(0));
  }).join();
  EXPECT_EQ(other, 0) << "a new thread starts on device 0";
  ASSERT_NPU_OK(npuGetDevice(&afterOtherSet));
  EXPECT_EQ(afterOtherSet, 1) << "another thread's npuSetDevice must not change ours";
}

TEST_F(DeviceTest, BadOrdinalLeavesCurrentDeviceUnchanged) {
  ASSERT_NPU_OK(npuSetDevice(1));
  EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(2));
  EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(-1));
  int device = -1;
  ASSERT_NPU_OK(npuGetDevice(&device));
  EXPECT_EQ(device, 1);
  EXPECT_NE(std::string(npuGetLastErrorMessage()), "");
}

TEST_F(DeviceTest, PropertiesDescribeEachDevice) {
  for (int d = 0; d < 2; ++d) {
    npuDeviceProp prop{};
    ASSERT_NPU_OK(npuGetDeviceProperties(&prop, d));
    EXPECT_EQ(std::string(prop.name), "NPU-SIM-" + std::to_string(d));
    EXPECT_EQ(prop.index, d);
    EXPECT_EQ(prop.coreCount, 2);
    EXPECT_EQ(prop.totalMemory, 8192 * kMiB);
    EXPECT_LE(prop.freeMemory, prop.totalMemory);
  }
}

TEST_F(DeviceTest, PropertiesDoNotDependOnCurrentDevice) {
  ASSERT_NPU_OK(npuSetDevice(1));
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.index, 0);
  EXPECT_EQ(std::string(prop.name), "NPU-SIM-0");
}

TEST_F(DeviceTest, MemGetInfoReportsTheCurrentDevice) {
  size_t free0 = 0, total0 = 0, free1 = 0, total1 = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&free0, &total0));
  EXPECT_EQ(total0, 8192 * kMiB);
  {
    npurt::DeviceGuard guard(1);
    ASSERT_NPU_OK(npuMemGetInfo(&free1, &total1));
  }
  void* p = nullptr;
  {
    npurt::DeviceGuard guard(1);
    ASSERT_NPU_OK(npuMalloc(&p, 4 * kMiB));
    size_t f = 0, t = 0;
    ASSERT_NPU_OK(npuMemGetInfo(&f, &t));
    EXPECT_EQ(f, free1 - 4 * kMiB);
    npuDeviceProp prop{};
    ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 1));
    EXPECT_EQ(prop.freeMemory, f);
  }
  size_t f0 = 0, t0 = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&f0, &t0));
  EXPECT_EQ(f0, free0) << "allocating on device 1 must not change device 0";
  ASSERT_NPU_OK(npuFree(p));
  npurt::DeviceGuard guard(1);
  size_t f1 = 0, t1 = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&f1, &t1));
  EXPECT_EQ(f1, free1);
}

TEST_F(DeviceTest, UtilizationIsTheCoresBusyShareOverTheLastSecond) {
  // Note [Device utilization]: one stream running (delayed) tasks back to
  // back for over a second keeps one of the two cores busy: 50 %. Device 1
  // ran nothing.
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 100'000));  // 100 ms per task
  auto done = makeEvent();
  for (int i = 0; i < 12; ++i) ASSERT_NPU_OK(npurt::launch(s.get(), "busy", [] {}));
  ASSERT_NPU_OK(npuEventRecord(done.get(), s.get()));
  ASSERT_NPU_OK(npuEventSynchronize(done.get()));
  unsigned percent = 999;
  ASSERT_NPU_OK(npuDeviceGetUtilization(0, &percent));
  EXPECT_GE(percent, 45u);
  EXPECT_LE(percent, 55u);
  ASSERT_NPU_OK(npuDeviceGetUtilization(1, &percent));
  EXPECT_EQ(percent, 0u);
  EXPECT_EQ(npuDeviceGetUtilization(2, &percent), npuErrorInvalidDevice);
  EXPECT_EQ(npuDeviceGetUtilization(0, nullptr), npuErrorInvalidValue);
}

TEST_F(DeviceTest, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
  auto a = makeStream(0);
  auto b = makeStream(0);
  std::atomic<int> done{0};
  for (auto* s : {&a, &b}) {
    ASSERT_NPU_OK(npuStreamSetTaskDelay(s->get(), 20'000));
    for (int i = 0; i < 3; ++i) ASSERT_NPU_OK(npurt::launch(s->get(), "work", [&] { done++; }));
  }
  ASSERT_NPU_OK(npuDeviceSynchronize());
  EXPECT_EQ(done.load(), 6);
  EXPECT_NPU_OK(npuStreamQuery(a.get()));
  EXPECT_NPU_OK(npuStreamQuery(b.get()));
}

TEST_F(DeviceTest, DeviceSynchronizeWaitsForDestroyedStreamsStillDraining) {
  std::atomic<int> done{0};
  {
    auto s = makeStream(0);
    ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 30'000));
    for (int i = 0; i < 4; ++i) ASSERT_NPU_OK(npurt::launch(s.get(), "drain", [&] { done++; }));
  }  // destroyed here, with (almost) all of its work still queued
  ASSERT_NPU_OK(npuDeviceSynchronize());
  EXPECT_EQ(done.load(), 4);
}

TEST_F(DeviceTest, DeviceSynchronizeIgnoresOtherDevices) {
  auto blocked = makeStream(1);
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(blocked.get()));
  auto mine = makeStream(0);
  std::atomic<bool> ran{false};
  ASSERT_NPU_OK(npurt::launch(mine.get(), "mine", [&] { ran = true; }));
  auto sync = std::async(std::launch::async, [] {
    (void)npuSetDevice(0);
    return npuDeviceSynchronize();
  });
  ASSERT_EQ(sync.wait_for(kHangTimeout), std::future_status::ready)
      << "npuDeviceSynchronize on device 0 waited for device 1";
  EXPECT_NPU_OK(sync.get());
  EXPECT_TRUE(ran.load());
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(blocked.get()));
  gate.open();
  npurt::DeviceGuard guard(1);
  EXPECT_NPU_OK(npuDeviceSynchronize());
}

TEST_F(DeviceTest, DeviceSynchronizeOnIdleDeviceReturns) {
  for (int d = 0; d < 2; ++d) {
    npurt::DeviceGuard guard(d);
    EXPECT_NPU_OK(npuDeviceSynchronize());
  }
}

TEST_F(DeviceTest, DeviceGuardRestoresOnScopeExitAndException) {
  ASSERT_NPU_OK(npuSetDevice(0));
  {
    npurt::DeviceGuard guard(1);
    int d = -1;
    ASSERT_NPU_OK(npuGetDevice(&d));
    EXPECT_EQ(d, 1);
  }
  int d = -1;
  ASSERT_NPU_OK(npuGetDevice(&d));
  EXPECT_EQ(d, 0);
  try {
    npurt::DeviceGuard guard(1);
    throw std::runtime_error("unwind");
  } catch (const std::runtime_error&) {
  }
  ASSERT_NPU_OK(npuGetDevice(&d));
  EXPECT_EQ(d, 0);
  EXPECT_THROW(npurt::DeviceGuard bad(7), npurt::Error);
  ASSERT_NPU_OK(npuGetDevice(&d));
  EXPECT_EQ(d, 0);
}

TEST_F(DeviceTest, StreamsAreCreatedOnTheCurrentDevice) {
  for (int d = 0; d < 2; ++d) {
    npurt::DeviceGuard guard(d);
    npuStream_t s = nullptr;
    ASSERT_NPU_OK(npuStreamCreate(&s));
    int device = -1;
    EXPECT_NPU_OK(npuStreamGetDevice(s, &device));
    EXPECT_EQ(device, d);
    EXPECT_NPU_OK(npuStreamDestroy(s));
  }
}

TEST_F(DeviceTest, TasksRunOnExecutorThreadsNotTheCaller) {
  auto s = makeStream(0);
  std::thread::id runner;
  ASSERT_NPU_OK(npurt::launch(s.get(), "where", [&] { runner = std::this_thread::get_id(); }));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_NE(runner, std::this_thread::get_id());
}

}  // namespace
}  // namespace npurt_test
