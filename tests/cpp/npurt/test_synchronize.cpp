// Covers Note [Stream scheduling rule]'s synchronization clause: stream and
// device synchronize wait for the work enqueued before the call, not for the
// stream to be idle, so producers that keep enqueuing cannot starve them;
// when they return, every task enqueued before the call has run; a held
// failure is still reported exactly once.
//
// The producers keep a bounded number of tasks queued on streams whose tasks
// take at least 100 us (Note [Task delay]), so the streams are never idle
// while the test synchronizes: a synchronize that waited for idleness would
// time out (the 30 s hang limit) instead of returning.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

constexpr int64_t kTaskDelayUs = 100;
// Tasks a producer keeps queued ahead of the device.
constexpr long kAhead = 200;

// A thread that enqueues counting tasks on a stream until stopped.
class Producer {
 public:
  explicit Producer(npuStream_t stream) : stream_(stream) {
    thread_ = std::thread([this] { loop(); });
  }
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  ~Producer() { stop(); }

  // Launches whose call returned (each one's task is "enqueued before" any
  // synchronize that starts after this read).
  long launched() const { return launched_->load(); }
  // Tasks that ran; tasks run in launch order, so ran() >= n means the first
  // n ran.
  long ran() const { return ran_->load(); }
  bool failed() const { return failed_.load(); }
  // Waits until the producer has `n` tasks launched (the device is busy).
  void waitLaunched(long n) const {
    while (launched() < n && !failed()) std::this_thread::yield();
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    while (!stop_.load()) {
      if (launched() - ran() >= kAhead) {
        std::this_thread::yield();
        continue;
      }
      if (npurt::launch(stream_, "produced", [ran = ran_] { ++*ran; }) != npuSuccess) {
        failed_ = true;
        return;
      }
      ++*launched_;
    }
  }

  npuStream_t stream_;
  std::shared_ptr<std::atomic<long>> launched_ = std::make_shared<std::atomic<long>>(0);
  std::shared_ptr<std::atomic<long>> ran_ = std::make_shared<std::atomic<long>>(0);
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

class SynchronizeTest : public NpurtTest {};

TEST_F(SynchronizeTest, StreamSynchronizeIsNotStarvedByAProducer) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), kTaskDelayUs));
  Producer producer(s.get());
  producer.waitLaunched(kAhead);
  for (int round = 0; round < 5; ++round) {
    const long before = producer.launched();
    ASSERT_NPU_OK(npuStreamSynchronize(s.get())) << "round " << round;
    EXPECT_GE(producer.ran(), before) << "round " << round;
  }
  for (int round = 0; round < 5; ++round) {
    const long before = producer.launched();
    ASSERT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs)) << "round " << round;
    EXPECT_GE(producer.ran(), before) << "round " << round;
  }
  EXPECT_NPU(npuErrorNotReady, npuStreamQuery(s.get())) << "the producer kept the stream busy";
  producer.stop();
  EXPECT_FALSE(producer.failed());
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), -1));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(producer.ran(), producer.launched());
}

TEST_F(SynchronizeTest, DeviceSynchronizeIsNotStarvedByProducers) {
  auto a = makeStream(0);
  auto b = makeStream(0, npuStreamDefault, -1);
  ASSERT_NPU_OK(npuStreamSetTaskDelay(a.get(), kTaskDelayUs));
  ASSERT_NPU_OK(npuStreamSetTaskDelay(b.get(), kTaskDelayUs));
  Producer pa(a.get()), pb(b.get());
  pa.waitLaunched(kAhead);
  pb.waitLaunched(kAhead);
  for (int round = 0; round < 5; ++round) {
    const long beforeA = pa.launched();
    const long beforeB = pb.launched();
    ASSERT_NPU_OK(npuDeviceSynchronize()) << "round " << round;
    EXPECT_GE(pa.ran(), beforeA) << "round " << round;
    EXPECT_GE(pb.ran(), beforeB) << "round " << round;
  }
  pa.stop();
  pb.stop();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(a.get(), -1));
  ASSERT_NPU_OK(npuStreamSetTaskDelay(b.get(), -1));
  ASSERT_NPU_OK(npuDeviceSynchronize());
  EXPECT_EQ(pa.ran(), pa.launched());
  EXPECT_EQ(pb.ran(), pb.launched());
}

TEST_F(SynchronizeTest, HeldFailureIsReportedOnceWhileAProducerRuns) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), kTaskDelayUs));
  ASSERT_NPU_OK(
      npurt::launch(s.get(), "fails_under_load", [] { throw std::runtime_error("under load"); }));
  Producer producer(s.get());
  producer.waitLaunched(kAhead);
  EXPECT_NPU(npuErrorLaunchFailure, npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs));
  const std::string message = npuGetLastErrorMessage();
  EXPECT_NE(message.find("task 'fails_under_load'"), std::string::npos) << message;
  for (int round = 0; round < 3; ++round) {
    EXPECT_NPU_OK(npuStreamSynchronizeWithTimeout(s.get(), kHangTimeoutUs)) << "reported once";
  }
  producer.stop();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), -1));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
}

}  // namespace
}  // namespace npurt_test
