// ACL callbacks (Note [ACL callbacks] in csrc/acl/src/callbacks.cpp): a
// subscribed thread runs them in aclrtProcessReport; ACL_CALLBACK_BLOCK holds
// the stream until the callback ran; nothing hangs without a thread.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <thread>

#include "acl/acl.h"

namespace {

void increment(void* counter) { ++*static_cast<std::atomic<int>*>(counter); }

uint64_t selfId() { return static_cast<uint64_t>(pthread_self()); }

TEST(AclCallbacks, SubscribedThreadRunsThemInOrder) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtSubscribeReport(selfId(), stream), ACL_SUCCESS);
  std::atomic<int> count{0};
  ASSERT_EQ(aclrtLaunchCallback(&increment, &count, ACL_CALLBACK_NO_BLOCK, stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchCallback(&increment, &count, ACL_CALLBACK_NO_BLOCK, stream), ACL_SUCCESS);
  // NO_BLOCK: the stream finishes without the callbacks having run.
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(count.load(), 0);
  ASSERT_EQ(aclrtProcessReport(-1), ACL_SUCCESS);
  EXPECT_EQ(count.load(), 1);
  ASSERT_EQ(aclrtProcessReport(-1), ACL_SUCCESS);
  EXPECT_EQ(count.load(), 2);
  EXPECT_EQ(aclrtProcessReport(0), ACL_ERROR_RT_REPORT_TIMEOUT);
  ASSERT_EQ(aclrtUnSubscribeReport(selfId(), stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtProcessReport(0), ACL_ERROR_RT_THREAD_SUBSCRIBE);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclCallbacks, BlockingCallbackHoldsTheStream) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtSubscribeReport(selfId(), stream), ACL_SUCCESS);
  std::atomic<int> callbacks{0}, after{0};
  ASSERT_EQ(aclrtLaunchCallback(&increment, &callbacks, ACL_CALLBACK_BLOCK, stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchHostFunc(stream, &increment, &after), ACL_SUCCESS);
  // Nothing processed the callback: the stream cannot finish.
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(stream, 5), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  EXPECT_EQ(after.load(), 0);
  ASSERT_EQ(aclrtProcessReport(-1), ACL_SUCCESS);
  EXPECT_EQ(callbacks.load(), 1);
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(after.load(), 1);
  ASSERT_EQ(aclrtUnSubscribeReport(selfId(), stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclCallbacks, ReportThreadAsInAclSamples) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  std::atomic<bool> stop{false};
  std::atomic<int> count{0};
  std::thread reporter([&] {
    while (!stop.load()) {
      const aclError e = aclrtProcessReport(10);
      if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT && e != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
        ADD_FAILURE() << "aclrtProcessReport: " << e;
        return;
      }
    }
  });
  const auto tid = static_cast<uint64_t>(reporter.native_handle());
  ASSERT_EQ(aclrtSubscribeReport(tid, stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtSubscribeReport(tid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(aclrtLaunchCallback(&increment, &count, ACL_CALLBACK_BLOCK, stream), ACL_SUCCESS);
  }
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);  // every BLOCK callback ran
  EXPECT_EQ(count.load(), 50);
  ASSERT_EQ(aclrtUnSubscribeReport(tid, stream), ACL_SUCCESS);
  stop = true;
  reporter.join();
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclCallbacks, UnsubscribeRunsHandedOverCallbacksAndLaterOnesStillRun) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  ASSERT_EQ(aclrtSubscribeReport(selfId(), stream), ACL_SUCCESS);
  std::atomic<int> count{0};
  ASSERT_EQ(aclrtLaunchCallback(&increment, &count, ACL_CALLBACK_BLOCK, stream), ACL_SUCCESS);
  // Handed over, then the thread unsubscribes without processing it.
  ASSERT_EQ(aclrtSynchronizeStreamWithTimeout(stream, 5), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  ASSERT_EQ(aclrtUnSubscribeReport(selfId(), stream), ACL_SUCCESS);
  EXPECT_EQ(count.load(), 1);
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

TEST(AclCallbacks, BadCalls) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  std::atomic<int> count{0};
  EXPECT_EQ(aclrtLaunchCallback(&increment, &count, ACL_CALLBACK_NO_BLOCK, stream),
            ACL_ERROR_RT_STREAM_NO_CB_REG);
  EXPECT_EQ(aclrtLaunchCallback(nullptr, &count, ACL_CALLBACK_NO_BLOCK, stream),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtLaunchCallback(&increment, &count, static_cast<aclrtCallbackBlockType>(2), stream),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtUnSubscribeReport(selfId(), stream), ACL_ERROR_STREAM_NOT_SUBSCRIBE);
  EXPECT_EQ(aclrtSubscribeReport(selfId(), reinterpret_cast<aclrtStream>(0x99)),
            ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtProcessReport(-5), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
  EXPECT_EQ(count.load(), 0);
}

}  // namespace
