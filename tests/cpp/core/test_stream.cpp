// Conformance tests of the framework core's streams, task queue and events
// (c10_npu::NPUStream, queue::*, NPUEvent, the PrivateUse1 guard), without
// Python. Asynchronous ordering is made observable with gates (tasks that
// block until the test releases them), never with sleeps.
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "core/NPUEvent.h"
#include "core/NPUStream.h"
#include "core/TaskQueue.h"
#include "test_launch.h"
#include "npurt/npurt.hpp"

namespace {

using c10_npu::NPUStream;
using c10_npu::StreamIdType;

using npu_core_test::launch;

// A task that blocks its stream until open() is called.
struct Gate {
  std::promise<void> promise;
  std::shared_future<void> future = promise.get_future().share();
  void blockOn(const NPUStream& s) {
    auto f = future;
    launch(s, [f] { f.wait(); });
  }
  void open() { promise.set_value(); }
};

TEST(NPUStreamTest, IdLayoutMatchesTorchNpu) {
  EXPECT_EQ(c10_npu::getDefaultNPUStream(0).id(), 0);
  EXPECT_EQ(c10_npu::getCurrentSecondaryStream(0).id(), 32);
  const auto sync = c10_npu::getNPUStreamFromSyncLaunchPool(0);
  EXPECT_GE(sync.id(), 64);
  EXPECT_LT(sync.id(), 68);
  EXPECT_EQ(sync.kind(), StreamIdType::SYNCLAUNCH);
  EXPECT_EQ(c10_npu::getStreamFromPool(0, 0).id() >> 5, 3);
  EXPECT_EQ(c10_npu::getStreamFromPool(-1, 0).id() >> 5, 4);
  EXPECT_EQ(c10_npu::getStreamFromPool(-5, 0).kind(), StreamIdType::HIGH);
}

TEST(NPUStreamTest, PoolIsRoundRobinOverThirtyTwoStreams) {
  std::set<c10::StreamId> ids;
  for (int i = 0; i < 64; ++i) ids.insert(c10_npu::getStreamFromPool(false, 1).id());
  EXPECT_EQ(ids.size(), 32u);
  for (auto id : ids) EXPECT_EQ(id >> 5, 3);
}

TEST(NPUStreamTest, GraphBodyStreamsArePrivateUntilReleased) {
  // Note [StreamId assignment]: a body stream is held by one capture at a time
  // and never handed out by the pools.
  std::vector<NPUStream> held;
  std::set<c10::StreamId> ids;
  for (int i = 0; i < c10_npu::kGraphBodyStreamsPerDevice; ++i) {
    held.push_back(c10_npu::acquireGraphBodyStream(1));
    EXPECT_EQ(held.back().kind(), StreamIdType::GRAPHBODY);
    EXPECT_EQ(held.back().device_index(), 1);
    ids.insert(held.back().id());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(c10_npu::kGraphBodyStreamsPerDevice));
  EXPECT_EQ(*ids.begin(), 6 << 5);
  try {
    (void)c10_npu::acquireGraphBodyStream(1);
    FAIL() << "a 33rd body stream was handed out";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("are in use"), std::string::npos) << e.what();
  }
  c10_npu::releaseGraphBodyStream(held[5]);
  EXPECT_EQ(c10_npu::acquireGraphBodyStream(1), held[5]);  // released, so free again
  for (int i = 0; i < 64; ++i) {
    EXPECT_NE(c10_npu::getStreamFromPool(i % 2 == 0 ? 0 : -1, 1).kind(), StreamIdType::GRAPHBODY);
  }
  const auto d = held[7].pack3();
  EXPECT_EQ(NPUStream::unpack3(d.stream_id, d.device_index, d.device_type), held[7]);
  EXPECT_NE(held[7].rawHandle(), held[8].rawHandle());
  EXPECT_THROW(NPUStream::unpack3(7 << 5, 1, c10::DeviceType::PrivateUse1), c10::Error);
  for (const auto& s : held) c10_npu::releaseGraphBodyStream(s);
}

TEST(NPUStreamTest, DefaultCaptureStreamIsABodyStreamHeldForGood) {
  // Note [StreamId assignment]: no pool call and no acquire returns
  // torch.npu.graph's default capture stream, so a fork from it is a fork.
  const NPUStream capture = c10_npu::getDefaultCaptureStream(0);
  EXPECT_EQ(capture.kind(), StreamIdType::GRAPHBODY);
  EXPECT_EQ(c10_npu::getDefaultCaptureStream(0), capture);
  for (int i = 0; i < 64; ++i)
    EXPECT_NE(c10_npu::getStreamFromPool(i % 2 == 0 ? 0 : -1, 0), capture);
  std::vector<NPUStream> held;
  for (int i = 1; i < c10_npu::kGraphBodyStreamsPerDevice; ++i) {
    held.push_back(c10_npu::acquireGraphBodyStream(0));
    EXPECT_NE(held.back(), capture);
  }
  EXPECT_THROW((void)c10_npu::acquireGraphBodyStream(0), c10::Error);  // the capture stream is held
  c10_npu::releaseGraphBodyStream(held.front());
  EXPECT_EQ(c10_npu::getDefaultCaptureStream(0), capture);
  for (const auto& s : held) c10_npu::releaseGraphBodyStream(s);
}

TEST(NPUStreamTest, Unpack3RoundTripsEveryKind) {
  std::vector<NPUStream> streams = {
      c10_npu::getDefaultNPUStream(0), c10_npu::getCurrentSecondaryStream(0),
      c10_npu::getNPUStreamFromSyncLaunchPool(0), c10_npu::getStreamFromPool(0, 1),
      c10_npu::getStreamFromPool(-1, 1)};
  npurt::StreamHandle ext = npurt::StreamHandle::create();
  streams.push_back(c10_npu::getStreamFromExternal(ext.get(), -1));
  for (const auto& s : streams) {
    const auto d = s.pack3();
    const auto back = NPUStream::unpack3(d.stream_id, d.device_index, d.device_type);
    EXPECT_EQ(back, s);
    EXPECT_EQ(back.rawHandle(), s.rawHandle());
  }
}

TEST(NPUStreamTest, Unpack3RejectsFakeIdsWithTorchNpuTexts) {
  const auto npu = c10::DeviceType::PrivateUse1;
  EXPECT_THROW(NPUStream::unpack3(99999, 0, npu), c10::Error);
  EXPECT_THROW(NPUStream::unpack3(-1, 0, npu), c10::Error);
  EXPECT_THROW(NPUStream::unpack3(0, 99, npu), c10::Error);
  EXPECT_THROW(NPUStream::unpack3(0, 0, c10::DeviceType::CPU), c10::Error);
  try {
    NPUStream::unpack3(64 + 4, 0, npu);
    FAIL() << "sync launch index 4 accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Invalid sync launch stream index"), std::string::npos);
  }
  try {
    NPUStream::unpack3((int64_t{1} << 30) | 12345, 0, npu);
    FAIL() << "unknown external id accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Unrecognized external NPU stream"), std::string::npos);
  }
  // An external id with bits above the marker is not the id of a registered
  // stream, even if its low bits are (found by tests/fuzz/stream_id_fuzz).
  npurt::StreamHandle ext = npurt::StreamHandle::create();
  const auto wrapped = c10_npu::getStreamFromExternal(ext.get(), 0);
  EXPECT_EQ(NPUStream::unpack3(wrapped.id(), 0, npu), wrapped);
  for (int bit = 31; bit < 63; ++bit) {
    const int64_t alias = wrapped.id() | (int64_t{1} << bit);
    try {
      NPUStream::unpack3(alias, 0, npu);
      FAIL() << "external id with bit " << bit << " set accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("Unrecognized external NPU stream"), std::string::npos);
    }
    EXPECT_THROW(NPUStream(c10::Stream(c10::Stream::UNSAFE,
                                       c10::Device(npu, 0), alias)),
                 c10::Error);
  }
  try {
    NPUStream::unpack3(0, 99, npu);
    FAIL() << "device 99 accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Invalid device_index"), std::string::npos);
  }
}

TEST(NPUStreamTest, CurrentStreamIsPerThreadAndPerDevice) {
  const auto s0 = c10_npu::getStreamFromPool(false, 0);
  const auto s1 = c10_npu::getStreamFromPool(false, 1);
  c10_npu::setCurrentNPUStream(s0);
  c10_npu::setCurrentNPUStream(s1);
  EXPECT_EQ(c10_npu::getCurrentNPUStream(0), s0);
  EXPECT_EQ(c10_npu::getCurrentNPUStream(1), s1);
  std::thread([&] {
    EXPECT_EQ(c10_npu::getCurrentNPUStream(0), c10_npu::getDefaultNPUStream(0));
    EXPECT_EQ(c10_npu::getCurrentNPUStream(1), c10_npu::getDefaultNPUStream(1));
  }).join();
  c10_npu::setCurrentNPUStream(c10_npu::getDefaultNPUStream(0));
  c10_npu::setCurrentNPUStream(c10_npu::getDefaultNPUStream(1));
}

TEST(NPUStreamTest, ExternalStreamRegistryReusesIdsAndForgetsDestroyedStreams) {
  npuStream_t raw = nullptr;
  ASSERT_EQ(npuStreamCreate(&raw), npuSuccess);
  const auto a = c10_npu::getStreamFromExternal(raw, -1);
  const auto b = c10_npu::getStreamFromExternal(raw, -1);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(a.isExternal());
  EXPECT_EQ(a.id() & (int64_t{1} << 30), int64_t{1} << 30);
  EXPECT_THROW(c10_npu::getStreamFromExternal(raw, 1), c10::Error);  // created on device 0
  ASSERT_EQ(npuStreamDestroy(raw), npuSuccess);
  EXPECT_THROW(a.rawHandle(), c10::Error);
  EXPECT_THROW(c10_npu::getStreamFromExternal(raw, -1), c10::Error);
  EXPECT_THROW(c10_npu::getStreamFromExternal(nullptr, -1), c10::Error);
}

TEST(NPUStreamTest, QueryIsFalseWhileQueuedWorkRunsAndSynchronizeWaits) {
  const auto s = c10_npu::getStreamFromPool(false, 0);
  Gate gate;
  gate.blockOn(s);
  std::atomic<bool> after{false};
  launch(s, [&] { after = true; });
  EXPECT_FALSE(s.query());
  gate.open();
  s.synchronize();
  EXPECT_TRUE(after.load());
  EXPECT_TRUE(s.query());
}

TEST(NPUStreamTest, LaunchesFromManyThreadsKeepPerThreadOrder) {
  const auto s = c10_npu::getStreamFromPool(false, 0);
  constexpr int kThreads = 4;
  constexpr int kTasks = 5000;
  std::vector<std::vector<int>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks; ++i) launch(s, [&seen, t, i] { seen[t].push_back(i); });
    });
  }
  for (auto& th : threads) th.join();
  s.synchronize();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kTasks));
    for (int i = 0; i < kTasks; ++i) ASSERT_EQ(seen[t][i], i);
  }
}

TEST(NPUEventTest, UnrecordedEventQueriesTrueAndBlockIsNoOp) {
  c10_npu::NPUEvent e;
  EXPECT_TRUE(e.query());
  e.block(c10_npu::getStreamFromPool(false, 0));
  e.synchronize();
  EXPECT_THROW(e.recorded_time(), c10::Error);
}

TEST(NPUEventTest, WaitOrdersWorkAcrossStreamsAndDevices) {
  const auto producer = c10_npu::getStreamFromPool(false, 0);
  const auto consumer = c10_npu::getStreamFromPool(false, 1);
  Gate gate;
  gate.blockOn(producer);
  std::atomic<int> value{0};
  launch(producer, [&] { value = 42; });
  c10_npu::NPUEvent e;
  e.record(producer);
  e.block(consumer);
  std::atomic<int> seen{-1};
  launch(consumer, [&] { seen = value.load(); });
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(consumer.query());
  gate.open();
  consumer.synchronize();
  EXPECT_EQ(seen.load(), 42);
  EXPECT_TRUE(e.query());
}

TEST(NPUEventTest, DeviceMismatchAndTimingErrorsUseTorchNpuTexts) {
  c10_npu::NPUEvent e;
  e.record(c10_npu::getStreamFromPool(false, 0));
  try {
    e.record(c10_npu::getStreamFromPool(false, 1));
    FAIL();
  } catch (const c10::Error& err) {
    EXPECT_NE(
        std::string(err.what()).find("Event device 0 does not match recording stream's device 1."),
        std::string::npos);
  }
  c10_npu::NPUEvent untimed;
  c10_npu::NPUEvent other;
  EXPECT_THROW(untimed.elapsed_time(other), c10::Error);
  c10_npu::NPUEvent a(npuEventDefault), b(npuEventDefault);
  EXPECT_THROW(a.elapsed_time(b), c10::Error);  // not recorded
  const auto s = c10_npu::getStreamFromPool(false, 0);
  a.record(s);
  b.record(s);
  EXPECT_GE(a.elapsed_time(b), 0.0f);
  EXPECT_GT(b.recorded_time(), 0u);
}

TEST(NPUGuardTest, GenericStreamApiGoesThroughTheGuard) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  const c10::Device d0(c10::DeviceType::PrivateUse1, 0);
  EXPECT_GE(impl->deviceCount(), 1);
  const c10::Stream fresh = impl->getNewStream(d0, -1);
  EXPECT_EQ(fresh.id() >> 5, 4);
  const c10::Stream previous = impl->exchangeStream(fresh);
  EXPECT_EQ(impl->getStream(d0), fresh);
  impl->exchangeStream(previous);
  void* event = nullptr;
  EXPECT_TRUE(impl->queryEvent(event));
  impl->record(&event, fresh, 0, c10::EventFlag::BACKEND_DEFAULT);
  ASSERT_NE(event, nullptr);
  impl->synchronizeEvent(event);
  EXPECT_TRUE(impl->queryEvent(event));
  EXPECT_TRUE(impl->queryStream(fresh));
  impl->destroyEvent(event, 0);
  EXPECT_NE(impl->getStreamNativeHandle(fresh), nullptr);
}

}  // namespace
