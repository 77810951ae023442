// Covers the error contract of npurt.h: status names and strings, the
// thread-local last error message, and that every function given a NULL,
// garbage or destroyed handle, a NULL out-parameter or bad flags returns the
// documented status without crashing (and, for launches, without taking
// ownership of the task).
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "npurt/npurt_stream_idle.h"

namespace npurt_test {
namespace {

struct StatusName {
  npuError_t status;
  int value;
  const char* name;
};

const StatusName kStatuses[] = {
    {npuSuccess, 0, "npuSuccess"},
    {npuErrorInvalidValue, 1, "npuErrorInvalidValue"},
    {npuErrorMemoryAllocation, 2, "npuErrorMemoryAllocation"},
    {npuErrorInitializationError, 3, "npuErrorInitializationError"},
    {npuErrorInvalidDevice, 4, "npuErrorInvalidDevice"},
    {npuErrorInvalidResourceHandle, 5, "npuErrorInvalidResourceHandle"},
    {npuErrorInvalidDevicePointer, 6, "npuErrorInvalidDevicePointer"},
    {npuErrorNotReady, 7, "npuErrorNotReady"},
    {npuErrorTimeout, 8, "npuErrorTimeout"},
    {npuErrorLaunchFailure, 9, "npuErrorLaunchFailure"},
    {npuErrorInvalidMemcpyDirection, 10, "npuErrorInvalidMemcpyDirection"},
    {npuErrorTimingDisabled, 11, "npuErrorTimingDisabled"},
    {npuErrorEventNotRecorded, 12, "npuErrorEventNotRecorded"},
    {npuErrorHostMemoryAlreadyRegistered, 13, "npuErrorHostMemoryAlreadyRegistered"},
    {npuErrorHostMemoryNotRegistered, 14, "npuErrorHostMemoryNotRegistered"},
    {npuErrorRuntimeShutdown, 15, "npuErrorRuntimeShutdown"},
    {npuErrorNotSupported, 16, "npuErrorNotSupported"},
    {npuErrorStreamCaptureUnsupported, 17, "npuErrorStreamCaptureUnsupported"},
    {npuErrorStreamCaptureInvalidated, 18, "npuErrorStreamCaptureInvalidated"},
    {npuErrorStreamCaptureUnjoined, 19, "npuErrorStreamCaptureUnjoined"},
    {npuErrorStreamCaptureWrongThread, 20, "npuErrorStreamCaptureWrongThread"},
    {npuErrorStreamCaptureIsolation, 21, "npuErrorStreamCaptureIsolation"},
    {npuErrorCapturedEvent, 22, "npuErrorCapturedEvent"},
    {npuErrorIllegalState, 23, "npuErrorIllegalState"},
    {npuErrorStreamCaptureUnmatched, 24, "npuErrorStreamCaptureUnmatched"},
    {npuErrorGraphExecUpdateFailure, 25, "npuErrorGraphExecUpdateFailure"},
    {npuErrorUnknown, 999, "npuErrorUnknown"},
};

// Stream handle values that never name a live stream: handles are ids, not
// pointers, so none of these may be dereferenced.
std::vector<npuStream_t> garbageStreams() {
  static int local = 0;
  return {nullptr, reinterpret_cast<npuStream_t>(uintptr_t{1}),
          reinterpret_cast<npuStream_t>(~uintptr_t{0}),
          reinterpret_cast<npuStream_t>(uintptr_t{0xdeadbeefcafef00d}),
          reinterpret_cast<npuStream_t>(&local)};
}

std::vector<npuEvent_t> garbageEvents() {
  static int local = 0;
  return {nullptr, reinterpret_cast<npuEvent_t>(uintptr_t{1}),
          reinterpret_cast<npuEvent_t>(~uintptr_t{0}),
          reinterpret_cast<npuEvent_t>(uintptr_t{0xdeadbeefcafef00d}),
          reinterpret_cast<npuEvent_t>(&local)};
}

int countingRun(void* user, char*, size_t) {
  static_cast<std::atomic<int>*>(user)[0]++;
  return 0;
}
void countingRelease(void* user) { static_cast<std::atomic<int>*>(user)[1]++; }
void noopHostFn(void*) {}

class ErrorsTest : public NpurtTest {
 protected:
  // Every stream-taking function must reject `s` with InvalidResourceHandle.
  void expectStreamRejected(npuStream_t s) {
    SCOPED_TRACE(testing::Message() << "stream handle " << static_cast<const void*>(s));
    const npuError_t bad = npuErrorInvalidResourceHandle;
    int i = 0;
    unsigned u = 0;
    uint64_t id = 0;
    EXPECT_NPU(bad, npuStreamQuery(s));
    EXPECT_NPU(bad, npuStreamPeekAtLastError(s));
    EXPECT_NPU(bad, npuStreamIsIdle(s, &i));
    EXPECT_NPU(bad, npuStreamSynchronize(s));
    EXPECT_NPU(bad, npuStreamSynchronizeWithTimeout(s, 1000));
    EXPECT_NPU(bad, npuStreamGetDevice(s, &i));
    EXPECT_NPU(bad, npuStreamGetPriority(s, &i));
    EXPECT_NPU(bad, npuStreamGetFlags(s, &u));
    EXPECT_NPU(bad, npuStreamGetId(s, &id));
    EXPECT_NPU(bad, npuStreamSetTaskDelay(s, 10));
    EXPECT_NPU(bad, npuStreamWaitEvent(s, event_.get(), 0));
    EXPECT_NPU(bad, npuEventRecord(event_.get(), s));
    EXPECT_NPU(bad, npuLaunchHostFunc(s, &noopHostFn, nullptr));
    EXPECT_NPU(bad, npuMemcpyAsync(dev_, host_, 64, npuMemcpyHostToDevice, s));
    EXPECT_NPU(bad, npuMemsetAsync(dev_, 0, 64, s));

    // A rejected task is not enqueued and its release is NOT called.
    std::atomic<int> counters[2] = {0, 0};
    npuTask task{"rejected", &countingRun, &countingRelease, counters, 0};
    EXPECT_NPU(bad, npuLaunchTask(s, &task));
    bool destroyed = false;
    struct Flag {
      bool* flag;
      explicit Flag(bool* f) : flag(f) {}
      Flag(Flag&& o) noexcept : flag(std::exchange(o.flag, nullptr)) {}
      ~Flag() {
        if (flag != nullptr) *flag = true;
      }
    };
    EXPECT_NPU(bad, npurt::launch(s, "rejected", [f = Flag(&destroyed)] {}));
    EXPECT_TRUE(destroyed) << "npurt::launch must destroy the callable when the launch fails";
    EXPECT_NPU(bad, npuStreamDestroy(s));
    ASSERT_NPU_OK(npuDeviceSynchronize());
    EXPECT_EQ(counters[0].load(), 0);
    EXPECT_EQ(counters[1].load(), 0) << "release must not be called for a rejected launch";
  }

  void expectEventRejected(npuEvent_t e) {
    SCOPED_TRACE(testing::Message() << "event handle " << static_cast<const void*>(e));
    const npuError_t bad = npuErrorInvalidResourceHandle;
    float ms = 0;
    uint64_t ns = 0;
    int device = 0;
    EXPECT_NPU(bad, npuEventRecord(e, stream_.get()));
    EXPECT_NPU(bad, npuEventQuery(e));
    EXPECT_NPU(bad, npuEventSynchronize(e));
    EXPECT_NPU(bad, npuEventElapsedTime(&ms, e, event_.get()));
    EXPECT_NPU(bad, npuEventElapsedTime(&ms, event_.get(), e));
    EXPECT_NPU(bad, npuEventGetTimestamp(e, &ns));
    EXPECT_NPU(bad, npuEventGetDevice(e, &device));
    EXPECT_NPU(bad, npuStreamWaitEvent(stream_.get(), e, 0));
    EXPECT_NPU(bad, npuEventDestroy(e));
  }

  void SetUp() override {
    NpurtTest::SetUp();
    stream_ = makeStream();
    event_ = makeEvent();
    ASSERT_NPU_OK(npuEventRecord(event_.get(), stream_.get()));
    ASSERT_NPU_OK(npuMalloc(&dev_, 256));
  }
  void TearDown() override {
    (void)npuFree(dev_);
    NpurtTest::TearDown();
  }

  npurt::StreamHandle stream_;
  npurt::EventHandle event_;
  void* dev_ = nullptr;
  char host_[256] = {};
};

TEST_F(ErrorsTest, StatusValuesAreStableAbi) {
  for (const auto& s : kStatuses) EXPECT_EQ(static_cast<int>(s.status), s.value) << s.name;
}

TEST_F(ErrorsTest, ErrorNamesMatchEnumerators) {
  for (const auto& s : kStatuses) EXPECT_STREQ(npuGetErrorName(s.status), s.name);
  EXPECT_STREQ(npuGetErrorName(static_cast<npuError_t>(12345)), "npuErrorUnrecognized");
  EXPECT_STREQ(npuGetErrorName(static_cast<npuError_t>(-1)), "npuErrorUnrecognized");
}

TEST_F(ErrorsTest, ErrorStringsAreNonEmptyAndDistinct) {
  std::vector<std::string> seen;
  for (const auto& s : kStatuses) {
    const char* text = npuGetErrorString(s.status);
    ASSERT_NE(text, nullptr) << s.name;
    EXPECT_GT(std::strlen(text), 0u) << s.name;
    for (const auto& other : seen) EXPECT_NE(other, text) << s.name;
    seen.emplace_back(text);
  }
  EXPECT_NE(npuGetErrorString(static_cast<npuError_t>(12345)), nullptr);
}

TEST_F(ErrorsTest, LastErrorMessageIsEmptyOnAFreshThread) {
  std::string message = "unset";
  std::thread([&] { message = npuGetLastErrorMessage(); }).join();
  EXPECT_EQ(message, "");
}

TEST_F(ErrorsTest, LastErrorMessageDescribesTheFailureOnItsThreadOnly) {
  std::string before;
  std::string after;
  std::string otherThread = "unset";
  std::thread([&] {
    before = npuGetLastErrorMessage();
    EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(-7));
    after = npuGetLastErrorMessage();
    std::thread([&] { otherThread = npuGetLastErrorMessage(); }).join();
  }).join();
  EXPECT_EQ(before, "");
  EXPECT_FALSE(after.empty()) << "a failing call must store a message";
  EXPECT_EQ(otherThread, "") << "the message is thread-local";
}

TEST_F(ErrorsTest, LastErrorMessageIsOfTheMostRecentFailure) {
  EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(1000));
  std::string first = npuGetLastErrorMessage();
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuStreamQuery(nullptr));
  std::string second = npuGetLastErrorMessage();
  EXPECT_FALSE(first.empty());
  EXPECT_FALSE(second.empty());
  EXPECT_NE(first, second);
}

TEST_F(ErrorsTest, CheckThrowsErrorWithNameAndMessage) {
  try {
    npurt::check(npuSetDevice(-1));
    FAIL() << "npurt::check must throw";
  } catch (const npurt::Error& e) {
    EXPECT_EQ(e.code(), npuErrorInvalidDevice);
    EXPECT_EQ(std::string(e.what()).rfind("npuErrorInvalidDevice: ", 0), 0u) << e.what();
  }
  EXPECT_NO_THROW(npurt::check(npuSuccess));
}

TEST_F(ErrorsTest, GarbageStreamHandlesAreRejected) {
  for (npuStream_t s : garbageStreams()) expectStreamRejected(s);
}

TEST_F(ErrorsTest, DestroyedStreamHandleIsRejectedEverywhere) {
  npuStream_t s = nullptr;
  ASSERT_NPU_OK(npuStreamCreate(&s));
  ASSERT_NPU_OK(npuStreamDestroy(s));
  expectStreamRejected(s);
}

TEST_F(ErrorsTest, GarbageEventHandlesAreRejected) {
  for (npuEvent_t e : garbageEvents()) expectEventRejected(e);
}

TEST_F(ErrorsTest, DestroyedEventHandleIsRejectedEverywhere) {
  npuEvent_t e = nullptr;
  ASSERT_NPU_OK(npuEventCreate(&e));
  ASSERT_NPU_OK(npuEventRecord(e, stream_.get()));
  ASSERT_NPU_OK(npuEventDestroy(e));
  expectEventRejected(e);
}

TEST_F(ErrorsTest, NullOutParametersAreInvalidValue) {
  const npuError_t bad = npuErrorInvalidValue;
  npuStream_t s = stream_.get();
  npuEvent_t e = event_.get();
  ASSERT_NPU_OK(npuStreamSynchronize(s));
  size_t size = 0;
  uint64_t handle = 0;
  float ms = 0;
  EXPECT_NPU(bad, npuGetDeviceCount(nullptr));
  EXPECT_NPU(bad, npuGetDevice(nullptr));
  EXPECT_NPU(bad, npuGetDeviceProperties(nullptr, 0));
  EXPECT_NPU(bad, npuMemGetInfo(nullptr, &size));
  EXPECT_NPU(bad, npuMemGetInfo(&size, nullptr));
  EXPECT_NPU(bad, npuStreamCreate(nullptr));
  EXPECT_NPU(bad, npuStreamCreateWithFlags(nullptr, npuStreamDefault));
  EXPECT_NPU(bad, npuStreamCreateWithPriority(nullptr, npuStreamDefault, 0));
  EXPECT_NPU(bad, npuStreamGetDevice(s, nullptr));
  EXPECT_NPU(bad, npuStreamGetPriority(s, nullptr));
  EXPECT_NPU(bad, npuStreamGetFlags(s, nullptr));
  EXPECT_NPU(bad, npuStreamGetId(s, nullptr));
  EXPECT_NPU(bad, npuEventCreate(nullptr));
  EXPECT_NPU(bad, npuEventCreateWithFlags(nullptr, npuEventDefault));
  EXPECT_NPU(bad, npuEventElapsedTime(nullptr, e, e));
  EXPECT_NPU(bad, npuEventGetTimestamp(e, nullptr));
  EXPECT_NPU(bad, npuEventGetDevice(e, nullptr));
  EXPECT_NPU(bad, npuMalloc(nullptr, 64));
  EXPECT_NPU(bad, npuMallocHost(nullptr, 64));
  EXPECT_NPU(bad, npuPointerGetAttributes(nullptr, host_));
  EXPECT_NPU(bad,
             npuRegisterStreamDestroyCallback([](npuStream_t, int, void*) {}, nullptr, nullptr));
  EXPECT_NPU(bad, npuRegisterStreamDestroyCallback(nullptr, nullptr, &handle));
  EXPECT_NPU(bad, npuGetTaskDelay(nullptr));
  EXPECT_NPU(bad, npuTraceWrite(nullptr));
  (void)ms;
}

TEST_F(ErrorsTest, NullPriorityRangeOutputsDoNotCrash) {
  // CUDA accepts NULL for either output here; npurt may accept or reject it,
  // but must not crash or report another status.
  int v = 0;
  for (npuError_t st :
       {npuDeviceGetStreamPriorityRange(nullptr, &v), npuDeviceGetStreamPriorityRange(&v, nullptr),
        npuDeviceGetStreamPriorityRange(nullptr, nullptr)}) {
    EXPECT_TRUE(st == npuSuccess || st == npuErrorInvalidValue) << npuGetErrorName(st);
  }
}

TEST_F(ErrorsTest, InvalidTasksAreRejectedWithoutTakingOwnership) {
  std::atomic<int> counters[2] = {0, 0};
  EXPECT_NPU(npuErrorInvalidValue, npuLaunchTask(stream_.get(), nullptr));
  EXPECT_NPU(npuErrorInvalidValue, npuLaunchHostFunc(stream_.get(), nullptr, nullptr));
  npuTask noRun{"no_run", nullptr, &countingRelease, counters, 0};
  EXPECT_NPU(npuErrorInvalidValue, npuLaunchTask(stream_.get(), &noRun));
  npuTask badFlags{"bad_flags", &countingRun, &countingRelease, counters, 0x80u};
  EXPECT_NPU(npuErrorInvalidValue, npuLaunchTask(stream_.get(), &badFlags));
  ASSERT_NPU_OK(npuStreamSynchronize(stream_.get()));
  EXPECT_EQ(counters[0].load(), 0);
  EXPECT_EQ(counters[1].load(), 0);
}

TEST_F(ErrorsTest, UnknownFlagBitsAreInvalidValue) {
  npuStream_t s = nullptr;
  npuEvent_t e = nullptr;
  EXPECT_NPU(npuErrorInvalidValue, npuStreamCreateWithFlags(&s, 0x2u));
  EXPECT_NPU(npuErrorInvalidValue, npuStreamCreateWithPriority(&s, 0x100u, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuEventCreateWithFlags(&e, 0x4u));
  EXPECT_NPU(npuErrorInvalidValue, npuEventCreateWithFlags(&e, 0x80000000u));
  EXPECT_NPU(npuErrorInvalidValue, npuStreamWaitEvent(stream_.get(), event_.get(), 1u));
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(host_, sizeof host_, 1u));
}

TEST_F(ErrorsTest, NegativeSynchronizeTimeoutIsInvalidValue) {
  EXPECT_NPU(npuErrorInvalidValue, npuStreamSynchronizeWithTimeout(stream_.get(), -1));
}

TEST_F(ErrorsTest, BadDeviceOrdinalsAreInvalidDevice) {
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  npuDeviceProp prop{};
  for (int d : {-1, count, count + 1, 1 << 30}) {
    EXPECT_NPU(npuErrorInvalidDevice, npuSetDevice(d));
    EXPECT_NPU(npuErrorInvalidDevice, npuGetDeviceProperties(&prop, d));
  }
}

TEST_F(ErrorsTest, UnknownStreamDestroyCallbackHandleIsInvalidValue) {
  EXPECT_NPU(npuErrorInvalidValue, npuUnregisterStreamDestroyCallback(0));
  EXPECT_NPU(npuErrorInvalidValue, npuUnregisterStreamDestroyCallback(0xfeedfacecafebeefull));
}

TEST_F(ErrorsTest, BadDevicePointersAreInvalidDevicePointer) {
  char* garbage = reinterpret_cast<char*>(uintptr_t{0x10});
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuFree(garbage));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuFree(host_));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(garbage, 0, 16));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemsetAsync(host_, 0, 16, stream_.get()));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemcpy(host_, garbage, 16, npuMemcpyDeviceToHost));
  // NULL where a device pointer is required: either status names the mistake.
  npuError_t st = npuMemcpy(nullptr, host_, 16, npuMemcpyHostToDevice);
  EXPECT_TRUE(st == npuErrorInvalidDevicePointer || st == npuErrorInvalidValue)
      << npuGetErrorName(st);
}

TEST_F(ErrorsTest, NullHostPointersAreInvalidValue) {
  char other[16] = {};
  EXPECT_NPU(npuErrorInvalidValue, npuMemcpy(nullptr, other, 16, npuMemcpyHostToHost));
  EXPECT_NPU(npuErrorInvalidValue, npuMemcpy(other, nullptr, 16, npuMemcpyHostToHost));
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(nullptr, 64, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(host_, 0, 0));
}

TEST_F(ErrorsTest, UnknownMemcpyKindIsRejected) {
  char other[64] = {};
  // Only 5..7 are representable in npuMemcpyKind (a C++ cast of other values
  // is undefined); ctypes callers could pass any int.
  for (int kind : {5, 6, 7}) {
    npuError_t st = npuMemcpy(other, host_, 16, static_cast<npuMemcpyKind>(kind));
    EXPECT_TRUE(st == npuErrorInvalidValue || st == npuErrorInvalidMemcpyDirection)
        << "kind " << kind << ": " << npuGetErrorName(st);
    st = npuMemcpyAsync(dev_, host_, 16, static_cast<npuMemcpyKind>(kind), stream_.get());
    EXPECT_TRUE(st == npuErrorInvalidValue || st == npuErrorInvalidMemcpyDirection)
        << "kind " << kind << ": " << npuGetErrorName(st);
  }
}

TEST_F(ErrorsTest, TraceWriteToUnwritablePathFails) {
  ASSERT_NPU_OK(npuTraceStart());
  ASSERT_NPU_OK(npuTraceStop());
  npuError_t st = npuTraceWrite("/nonexistent-npurt-dir/sub/trace.json");
  EXPECT_NE(st, npuSuccess);
  EXPECT_NE(std::string(npuGetLastErrorMessage()), "");
}

TEST_F(ErrorsTest, FailingCallsFromManyThreadsKeepTheirOwnMessages) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t % 2 == 0) {
          if (npuSetDevice(-1 - t) != npuErrorInvalidDevice) mismatches++;
        } else if (npuStreamQuery(nullptr) != npuErrorInvalidResourceHandle) {
          mismatches++;
        }
        if (std::string(npuGetLastErrorMessage()).empty()) mismatches++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace npurt_test
