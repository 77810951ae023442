// Conformance of the ACL-compatible API (csrc/acl) over npurt: the numeric
// values programs compare against, bad arguments and handles as status codes,
// streams, events and memory with ACL's semantics, and the identity of ACL
// and npurt handles.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "npurt/npurt.h"

namespace {

TEST(AclValues, StatusCodesAndEnumsAreAcls) {
  EXPECT_EQ(ACL_ERROR_NONE, 0);
  EXPECT_EQ(ACL_ERROR_INVALID_PARAM, 100000);
  EXPECT_EQ(ACL_ERROR_REPEAT_INITIALIZE, 100002);
  EXPECT_EQ(ACL_ERROR_REPEAT_FINALIZE, 100037);
  EXPECT_EQ(ACL_ERROR_RT_PARAM_INVALID, 107000);
  EXPECT_EQ(ACL_ERROR_RT_INVALID_DEVICEID, 107001);
  EXPECT_EQ(ACL_ERROR_RT_INVALID_HANDLE, 107017);
  EXPECT_EQ(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001);
  EXPECT_EQ(ACL_ERROR_RT_REPORT_TIMEOUT, 507012);
  EXPECT_EQ(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, 507046);
  EXPECT_EQ(ACL_MEMCPY_HOST_TO_HOST, 0);
  EXPECT_EQ(ACL_MEMCPY_HOST_TO_DEVICE, 1);
  EXPECT_EQ(ACL_MEMCPY_DEVICE_TO_HOST, 2);
  EXPECT_EQ(ACL_MEMCPY_DEVICE_TO_DEVICE, 3);
  EXPECT_EQ(ACL_CALLBACK_NO_BLOCK, 0);
  EXPECT_EQ(ACL_CALLBACK_BLOCK, 1);
  EXPECT_EQ(ACL_EVENT_RECORDED_STATUS_COMPLETE, 1);
  EXPECT_EQ(ACL_STREAM_STATUS_NOT_READY, 1);
}

TEST(AclInit, InitAndFinalizePairUp) {
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("already initialised"), std::string::npos);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE);
}

TEST(AclDevice, SetGetCountAndBadIds) {
  uint32_t count = 0;
  ASSERT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
  EXPECT_EQ(count, 2u);  // NPU_SIM_DEVICE_COUNT's default
  ASSERT_EQ(aclrtSetDevice(1), ACL_SUCCESS);
  int32_t device = -1;
  ASSERT_EQ(aclrtGetDevice(&device), ACL_SUCCESS);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(aclrtSetDevice(7), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("aclrtSetDevice"), std::string::npos);
  EXPECT_EQ(aclrtResetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetDevice(&device), ACL_SUCCESS);
  EXPECT_EQ(device, 1);  // reset does not change the current device
  EXPECT_EQ(aclrtGetDevice(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
}

TEST(AclDevice, SocNameIsTheSimulatedChip) {
  // No chip by default; the one NPU_SIM_SOC_VERSION names when set (CTest
  // runs this test both ways, tests/cpp/acl/CMakeLists.txt).
  const char* expected = std::getenv("NPU_SIM_SOC_VERSION");
  const char* name = aclrtGetSocName();
  if (expected == nullptr) {
    EXPECT_EQ(name, nullptr);
  } else {
    ASSERT_NE(name, nullptr);
    EXPECT_STREQ(name, expected);
  }
  EXPECT_EQ(aclrtGetSocName(), name);  // the same string for the life of the process
}

TEST(AclDevice, UtilizationRateIsNpurtsInCannsLayout) {
  // Note [Device utilization]: cube and vector are npurt's busy share; AI CPU
  // and memory utilization are not simulated (-1).
  aclrtUtilizationInfo info{};
  info.cubeUtilization = info.vectorUtilization = 999;
  ASSERT_EQ(aclrtGetDeviceUtilizationRate(1, &info), ACL_SUCCESS);
  unsigned percent = 0;
  ASSERT_EQ(npuDeviceGetUtilization(1, &percent), npuSuccess);
  EXPECT_LE(info.cubeUtilization, 100);
  EXPECT_EQ(info.cubeUtilization, info.vectorUtilization);
  EXPECT_EQ(info.aicpuUtilization, -1);
  EXPECT_EQ(info.memoryUtilization, -1);
  EXPECT_EQ(aclrtGetDeviceUtilizationRate(0, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtGetDeviceUtilizationRate(7, &info), ACL_ERROR_RT_INVALID_DEVICEID);
}

TEST(AclDevice, OpExecuteTimeoutIsNpurts) {
  ASSERT_EQ(aclrtSetOpExecuteTimeOut(3), ACL_SUCCESS);
  uint64_t us = 0;
  ASSERT_EQ(npuGetOpExecuteTimeout(&us), npuSuccess);
  EXPECT_EQ(us, 3'000'000u);
  uint64_t actual = 0;
  ASSERT_EQ(aclrtSetOpExecuteTimeOutV2(1500, &actual), ACL_SUCCESS);
  EXPECT_EQ(actual, 1500u);
  ASSERT_EQ(npuGetOpExecuteTimeout(&us), npuSuccess);
  EXPECT_EQ(us, 1500u);
  ASSERT_EQ(aclrtSetOpExecuteTimeOutV2(0, nullptr), ACL_SUCCESS);
}

TEST(AclStream, AnAclStreamIsAnNpurtStream) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  int device = -1;
  EXPECT_EQ(npuStreamGetDevice(static_cast<npuStream_t>(stream), &device), npuSuccess);
  EXPECT_EQ(device, 0);
  ASSERT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
  EXPECT_EQ(npuStreamQuery(static_cast<npuStream_t>(stream)), npuErrorInvalidResourceHandle);
}

TEST(AclStream, BadHandlesAreStatusCodes) {
  aclrtStream garbage = reinterpret_cast<aclrtStream>(0xdeadbeef);
  aclrtStreamStatus status{};
  EXPECT_EQ(aclrtSynchronizeStream(garbage), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtStreamQuery(garbage, &status), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtDestroyStream(garbage), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
  aclrtStream s = nullptr;
  EXPECT_EQ(aclrtCreateStreamWithConfig(&s, 8, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("priority 8"), std::string::npos);
  EXPECT_EQ(aclrtCreateStreamWithConfig(&s, 0, 0x100), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(nullptr, -2), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtStreamQuery(nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
}

TEST(AclStream, QueryAndTimedSynchronizeSeeQueuedWork) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStreamWithConfig(&stream, 3, ACL_STREAM_FAST_LAUNCH), ACL_SUCCESS);
  // The stream waits on a version only the host completes: deterministic.
  npuEvent_t gate = nullptr;
  npuDeferredRecord_t open = nullptr;
  ASSERT_EQ(npuEventCreate(&gate), npuSuccess);
  ASSERT_EQ(npuEventRecordDeferred(gate, &open), npuSuccess);
  ASSERT_EQ(aclrtStreamWaitEvent(stream, gate), ACL_SUCCESS);
  aclrtStreamStatus status{};
  ASSERT_EQ(aclrtStreamQuery(stream, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_STREAM_STATUS_NOT_READY);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(stream, 1), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  ASSERT_EQ(npuEventCompleteDeferred(open), npuSuccess);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(stream, -1), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamQuery(stream, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_STREAM_STATUS_COMPLETE);
  EXPECT_EQ(npuEventDestroy(gate), npuSuccess);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclStream, NullIsTheDevicesDefaultAclStream) {
  std::atomic<int> ran{0};
  ASSERT_EQ(aclrtLaunchHostFunc(nullptr, [](void* p) { ++*static_cast<std::atomic<int>*>(p); },
                                &ran),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(aclrtLaunchHostFunc(nullptr, nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
}

TEST(AclStream, TaskFailureIsReportedOnceBySynchronize) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  npuTask task{};
  task.name = "failing kernel";
  task.run = [](void*, char* buf, size_t n) {
    std::snprintf(buf, n, "boom");
    return 1;
  };
  ASSERT_EQ(npuLaunchTask(static_cast<npuStream_t>(stream), &task), npuSuccess);
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_ERROR_RT_AICORE_EXCEPTION);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("failing kernel"), std::string::npos);
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclEvent, RecordQuerySynchronizeElapsed) {
  aclrtStream stream = nullptr;
  aclrtEvent start = nullptr, end = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&start), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE), ACL_SUCCESS);
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  ASSERT_EQ(aclrtQueryEventStatus(start, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_NOT_READY);  // never recorded
  ASSERT_EQ(aclrtRecordEvent(start, stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(end, stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeEvent(end), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEventStatus(end, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  float ms = -1;
  ASSERT_EQ(aclrtEventElapsedTime(&ms, start, end), ACL_SUCCESS);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(aclrtEventElapsedTime(nullptr, start, end), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyEvent(start), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(end), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclEvent, FlagsAndBadHandles) {
  aclrtEvent event = nullptr;
  EXPECT_EQ(aclrtCreateEventWithFlag(&event, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCreateEventWithFlag(&event, 0x40), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCreateEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtCreateEventWithFlag(&event, ACL_EVENT_SYNC), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(event, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeEvent(event), ACL_SUCCESS);
  float ms = 0;
  EXPECT_EQ(aclrtEventElapsedTime(&ms, event, event), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  ASSERT_EQ(aclrtDestroyEvent(event), ACL_SUCCESS);
  aclrtEventRecordedStatus status{};
  EXPECT_EQ(aclrtQueryEventStatus(event, &status), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtSynchronizeEvent(event), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtDestroyEvent(event), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtRecordEvent(reinterpret_cast<aclrtEvent>(0x77), nullptr),
            ACL_ERROR_RT_INVALID_HANDLE);
}

TEST(AclMemory, CopiesMemsetsAndBounds) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  std::vector<uint8_t> host(1024), back(1024, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i);
  void* dev = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, host.size(), ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(dev, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(dev, host.size(), 7, 16, stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(back.data(), back.size(), dev, back.size(), ACL_MEMCPY_DEFAULT,
                             stream),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], i < 16 ? 7 : host[i]) << i;
  ASSERT_EQ(aclrtMemset(dev, host.size(), 0, host.size()), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(back.data(), back.size(), dev, 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(back[0] + back[1] + back[2] + back[3], 0);

  // ACL's bounds and arguments, checked before npurt sees the call.
  EXPECT_EQ(aclrtMemcpy(dev, 8, host.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("exceeds destMax"), std::string::npos);
  EXPECT_EQ(aclrtMemcpy(dev, 16, host.data(), 16, static_cast<aclrtMemcpyKind>(9)),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemset(dev, 8, 0, 16), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&dev, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  // ... and npurt's range checks, mapped.
  EXPECT_EQ(aclrtMemcpy(static_cast<char*>(dev) + 1020, 64, host.data(), 64,
                        ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_ERROR_RT_PARAM_INVALID);
  void* huge = nullptr;
  EXPECT_EQ(aclrtMalloc(&huge, size_t{1} << 50, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_ERROR_RT_MEMORY_ALLOCATION);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(dev), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclMemory, PinnedHostMemoryAndMemInfo) {
  void* pinned = nullptr;
  ASSERT_EQ(aclrtMallocHost(&pinned, 4096), ACL_SUCCESS);
  npuPointerAttributes attributes{};
  ASSERT_EQ(npuPointerGetAttributes(&attributes, pinned), npuSuccess);
  EXPECT_EQ(attributes.type, npuMemoryTypeHost);
  EXPECT_EQ(aclrtFreeHost(pinned), ACL_SUCCESS);
  EXPECT_EQ(aclrtMallocHost(nullptr, 16), ACL_ERROR_INVALID_PARAM);

  size_t free = 0, total = 0;
  ASSERT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free, &total), ACL_SUCCESS);
  EXPECT_EQ(total, size_t{8192} << 20);  // NPU_SIM_MEMORY_MB's default
  EXPECT_LE(free, total);
  ASSERT_EQ(aclrtGetMemInfo(ACL_DDR_MEM, &free, &total), ACL_SUCCESS);
  EXPECT_EQ(total, 0u);
  EXPECT_EQ(aclrtGetMemInfo(static_cast<aclrtMemAttr>(42), &free, &total),
            ACL_ERROR_INVALID_PARAM);
}

TEST(AclMemory, HostRegisterMapsHostMemoryIntoTheDevice) {
  std::vector<unsigned char> host(8192, 0);
  void* devPtr = nullptr;
  ASSERT_EQ(aclrtHostRegister(host.data(), 4096, ACL_HOST_REGISTER_MAPPED, &devPtr), ACL_SUCCESS);
  EXPECT_EQ(devPtr, host.data());
  // The device reaches it: a device-to-device copy from it into device memory.
  void* dev = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  host[4095] = 7;
  ASSERT_EQ(aclrtMemcpy(dev, 4096, devPtr, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(host.data() + 4096, 4096, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_SUCCESS);
  EXPECT_EQ(host[8191], 7);
  EXPECT_NE(aclrtHostRegister(host.data(), 4096, ACL_HOST_REGISTER_MAPPED, &devPtr), ACL_SUCCESS)
      << "registered twice";
  EXPECT_EQ(aclrtHostRegister(host.data(), 4096, ACL_HOST_REGISTER_IOMEMORY, &devPtr),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtHostRegister(host.data(), 4096, ACL_HOST_REGISTER_MAPPED, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtHostUnregister(host.data()), ACL_SUCCESS);
  EXPECT_NE(aclrtHostUnregister(host.data()), ACL_SUCCESS);
  EXPECT_NE(aclrtMemcpy(dev, 4096, devPtr, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS)
      << "no longer device memory";
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
}

}  // namespace
