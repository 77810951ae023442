// Covers the configuration variables (csrc/npurt/README.md, "Configuration"):
// invalid NPU_SIM_* values make every call fail with
// npuErrorInitializationError and a message naming the variable, stickily;
// valid values are honoured. The configuration is read once per process, so
// every case re-runs itself in a child process with its environment.
#include <string>

#include "test_util.h"

namespace npurt_test {
namespace {

struct BadValue {
  const char* variable;
  const char* value;
};

void PrintTo(const BadValue& v, std::ostream* os) { *os << v.variable << "=" << v.value; }

class ConfigBadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadValueTest, EveryCallFailsWithAMessageNamingTheVariable) {
  const BadValue bad = GetParam();
  NPURT_RUN_IN_CHILD_WITH_ENV({{bad.variable, std::string(bad.value)}});
  int count = -1;
  ASSERT_NPU(npuErrorInitializationError, npuGetDeviceCount(&count));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find(bad.variable), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("'") + bad.value + "'"), std::string::npos)
      << "the message should quote the bad value: " << message;
  // Sticky: later calls, of any kind, fail the same way.
  npuStream_t s = nullptr;
  void* p = nullptr;
  EXPECT_NPU(npuErrorInitializationError, npuStreamCreate(&s));
  EXPECT_NPU(npuErrorInitializationError, npuMalloc(&p, 64));
  EXPECT_NPU(npuErrorInitializationError, npuSetDevice(0));
  EXPECT_NPU(npuErrorInitializationError, npuGetDeviceCount(&count));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find(bad.variable), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, ConfigBadValueTest,
    ::testing::Values(
        BadValue{"NPU_SIM_DEVICE_COUNT", "0"}, BadValue{"NPU_SIM_DEVICE_COUNT", "33"},
        BadValue{"NPU_SIM_DEVICE_COUNT", "abc"}, BadValue{"NPU_SIM_DEVICE_COUNT", "-1"},
        BadValue{"NPU_SIM_DEVICE_COUNT", "2x"}, BadValue{"NPU_SIM_CORES", "0"},
        BadValue{"NPU_SIM_CORES", "257"}, BadValue{"NPU_SIM_CORES", "abc"},
        BadValue{"NPU_SIM_MEMORY_MB", "x"}, BadValue{"NPU_SIM_MEMORY_MB", "0"},
        BadValue{"NPU_SIM_MEMORY_MB", "16777217"}, BadValue{"NPU_SIM_TASK_DELAY_US", "-5"},
        BadValue{"NPU_SIM_TASK_DELAY_US", "10000001"}, BadValue{"NPU_SIM_EXIT_TIMEOUT_MS", "abc"},
        BadValue{"NPU_SIM_EXIT_TIMEOUT_MS", "3600001"}, BadValue{"NPU_SIM_FAULT", "alloc"},
        BadValue{"NPU_SIM_FAULT", "alloc:0"}, BadValue{"NPU_SIM_FAULT", "oops:1"},
        BadValue{"NPU_SIM_FAULT", "task:x"}, BadValue{"NPU_SIM_FAULT", "copy:-1"},
        BadValue{"NPU_SIM_SOC_VERSION", "Ascend999"},
        BadValue{"NPU_SIM_SOC_VERSION", "ascend910b1"}),
    [](const ::testing::TestParamInfo<BadValue>& p) {
      std::string name = std::string(p.param.variable).substr(8) + "_" + std::to_string(p.index);
      return name;
    });

class ConfigTest : public ::testing::Test {};

TEST_F(ConfigTest, DeviceCountFourIsReported) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_DEVICE_COUNT", "4"}});
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  EXPECT_EQ(count, 4);
  EXPECT_NPU_OK(npuSetDevice(3));
  EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(4));
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 3));
  EXPECT_EQ(std::string(prop.name), "NPU-SIM-3");
  npuStream_t s = nullptr;
  ASSERT_NPU_OK(npuStreamCreate(&s));
  int device = -1;
  ASSERT_NPU_OK(npuStreamGetDevice(s, &device));
  EXPECT_EQ(device, 3);
  ASSERT_NPU_OK(npurt::launch(s, "on_device_3", [] {}));
  EXPECT_NPU_OK(npuStreamSynchronize(s));
  EXPECT_NPU_OK(npuStreamDestroy(s));
}

// Note [Device count before initialisation]: the probe reads the
// environment afresh, builds nothing, and follows the runtime once it started.
TEST_F(ConfigTest, ProbeRereadsTheEnvironmentUntilTheRuntimeStarts) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_DEVICE_COUNT", "3"}});
  int count = 0;
  ASSERT_NPU_OK(npuProbeDeviceCount(&count));
  EXPECT_EQ(count, 3);
  ASSERT_EQ(setenv("ASCEND_RT_VISIBLE_DEVICES", "2,0", 1), 0);
  ASSERT_NPU_OK(npuProbeDeviceCount(&count));
  EXPECT_EQ(count, 2);
  ASSERT_EQ(setenv("ASCEND_RT_VISIBLE_DEVICES", "5", 1), 0);
  EXPECT_NPU(npuErrorInitializationError, npuProbeDeviceCount(&count));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("ASCEND_RT_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuProbeDeviceCount(nullptr));
  ASSERT_EQ(setenv("ASCEND_RT_VISIBLE_DEVICES", "1", 1), 0);
  ASSERT_NPU_OK(npuGetDeviceCount(&count));  // starts the runtime with one device
  EXPECT_EQ(count, 1);
  ASSERT_EQ(setenv("ASCEND_RT_VISIBLE_DEVICES", "0,1,2", 1), 0);
  ASSERT_NPU_OK(npuProbeDeviceCount(&count));
  EXPECT_EQ(count, 1);  // frozen
}

TEST_F(ConfigTest, DeviceCountBoundsAreAccepted) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_DEVICE_COUNT", "32"}});
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  EXPECT_EQ(count, 32);
}

TEST_F(ConfigTest, SingleDevice) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_DEVICE_COUNT", "1"}});
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  EXPECT_EQ(count, 1);
  EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(1));
}

TEST_F(ConfigTest, CoresOneIsReportedAndRuns) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "1"}});
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.coreCount, 1);
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 1));
  EXPECT_EQ(prop.coreCount, 1);
  auto a = npurt::StreamHandle::create();
  auto b = npurt::StreamHandle::create();
  int runs = 0;
  for (int i = 0; i < 100; ++i) {
    ASSERT_NPU_OK(npurt::launch(a.get(), "a", [&runs] { runs++; }));
  }
  ASSERT_NPU_OK(npuStreamSynchronize(a.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(b.get()));
  EXPECT_EQ(runs, 100);
}

TEST_F(ConfigTest, CoresUpperBoundIsAccepted) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "256"}, {"NPU_SIM_DEVICE_COUNT", "1"}});
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.coreCount, 256);
}

TEST_F(ConfigTest, MemoryMegabytesSetsTheCapacity) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_MEMORY_MB", "1"}});
  size_t free = 0, total = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&free, &total));
  EXPECT_EQ(total, size_t{1} << 20);
  void* p = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&p, (size_t{1} << 20) + 1));
  ASSERT_NPU_OK(npuMalloc(&p, size_t{1} << 20));
  EXPECT_NPU_OK(npuFree(p));
}

TEST_F(ConfigTest, SocVersionNamesEveryDevice) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_SOC_VERSION", "Ascend910B4-1"}});
  for (int device = 0; device < 2; ++device) {
    npuDeviceProp prop{};
    ASSERT_NPU_OK(npuGetDeviceProperties(&prop, device));
    EXPECT_EQ(std::string(prop.name), "Ascend910B4-1");
    EXPECT_EQ(std::string(prop.socName), "Ascend910B4-1");
  }
}

TEST_F(ConfigTest, EveryAscend950VariantIsAccepted) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_SOC_VERSION", "Ascend950PR_9599"}});
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 1));
  EXPECT_EQ(std::string(prop.socName), "Ascend950PR_9599");
}

TEST_F(ConfigTest, DefaultsWhenUnset) {
  NPURT_RUN_IN_CHILD_WITH_ENV({});
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  EXPECT_EQ(count, 2);
  npuDeviceProp prop{};
  ASSERT_NPU_OK(npuGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.coreCount, 2);
  EXPECT_EQ(prop.totalMemory, size_t{8192} << 20);
  EXPECT_EQ(std::string(prop.name), "NPU-SIM-0");
  EXPECT_EQ(std::string(prop.socName), "");  // no chip model
  uint32_t delay = 1;
  ASSERT_NPU_OK(npuGetTaskDelay(&delay));
  EXPECT_EQ(delay, 0u);
}

TEST_F(ConfigTest, SeveralBadVariablesReportOneOfThem) {
  // Only the error status is guaranteed when several variables are bad, and
  // the message names one of them.
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_CORES", "0"}, {"NPU_SIM_MEMORY_MB", "y"}});
  int count = 0;
  ASSERT_NPU(npuErrorInitializationError, npuGetDeviceCount(&count));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_TRUE(message.find("NPU_SIM_CORES") != std::string::npos ||
              message.find("NPU_SIM_MEMORY_MB") != std::string::npos)
      << message;
}

}  // namespace
}  // namespace npurt_test
