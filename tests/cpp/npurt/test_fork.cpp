// Covers Note [Fork]: in the fork() child of a process whose runtime is up,
// every call fails promptly with npuErrorInitializationError and a message
// naming the fork, npuGetForkState says so, and the child exits cleanly; a
// child of a process that never used npurt uses it normally. The children
// report their checks through their exit status (no gtest in a child forked
// from a multithreaded process); the exit-hook case, which needs a real
// process exit, is in test_exit.cpp.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "test_util.h"

namespace npurt_test {
namespace {

// Waits for `pid`, killing it if it runs past the hang limit. Returns the raw
// wait status, or -1 if it had to be killed.
int waitChild(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + kHangTimeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 || std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a process, not work
  }
}

bool namesTheFork() { return std::strstr(npuGetLastErrorMessage(), "forked child") != nullptr; }

// Body of the child of an initialised parent. Returns 0, or the number of
// the first check that failed.
int badForkChecks(npuStream_t parentStream, void* parentPtr) {
  int state = -1;
  if (npuGetForkState(&state) != npuSuccess || state != 1) return 10;
  if (npuStreamSynchronize(parentStream) != npuErrorInitializationError) return 11;
  if (!namesTheFork()) return 12;
  npuStream_t s = nullptr;
  if (npuStreamCreate(&s) != npuErrorInitializationError) return 13;
  if (npuLaunchHostFunc(
          parentStream, [](void*) {}, nullptr) != npuErrorInitializationError) {
    return 14;
  }
  if (npuDeviceSynchronize() != npuErrorInitializationError) return 15;
  void* p = nullptr;
  if (npuMalloc(&p, 64) != npuErrorInitializationError) return 16;
  if (npuFree(parentPtr) != npuErrorInitializationError) return 17;
  if (npuStreamQuery(parentStream) != npuErrorInitializationError) return 18;
  if (!namesTheFork()) return 19;
  int count = 0;
  if (npuGetDeviceCount(&count) != npuErrorInitializationError) return 20;
  return 0;
}

class ForkTest : public NpurtTest {};

TEST_F(ForkTest, ChildOfAnInitialisedParentGetsInitializationError) {
  auto s = makeStream();
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, 256));
  // Busy executors at the fork: a task blocks until after the child exited.
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_TRUE(gate.waitStarted());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) _exit(badForkChecks(s.get(), d));
  const int status = waitChild(pid);
  ASSERT_NE(status, -1) << "the forked child hung";
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "first failed check in the child";
  int state = -1;
  ASSERT_NPU_OK(npuGetForkState(&state));
  EXPECT_EQ(state, 0) << "the parent is not a forked child";
  gate.open();
  EXPECT_NPU_OK(npuStreamSynchronize(s.get())) << "the parent is unaffected";
  EXPECT_NPU_OK(npuFree(d));
}

TEST_F(ForkTest, GetForkStateRejectsNull) {
  EXPECT_NPU(npuErrorInvalidValue, npuGetForkState(nullptr));
}

// Body of a child whose parent never used npurt: everything works, and the
// child's own exit hook runs at std::exit.
int goodForkChecks() {
  int state = -1;
  if (npuGetForkState(&state) != npuSuccess || state != 0) return 30;
  npuStream_t s = nullptr;
  if (npuStreamCreate(&s) != npuSuccess) return 31;
  static std::atomic<int> ran{0};
  if (npuLaunchHostFunc(
          s, [](void*) { ++ran; }, nullptr) != npuSuccess) {
    return 32;
  }
  if (npuStreamSynchronize(s) != npuSuccess || ran.load() != 1) return 33;
  void* d = nullptr;
  char host[16] = "forked";
  char back[16] = {};
  if (npuMalloc(&d, sizeof host) != npuSuccess) return 34;
  if (npuMemcpy(d, host, sizeof host, npuMemcpyHostToDevice) != npuSuccess) return 35;
  if (npuMemcpy(back, d, sizeof back, npuMemcpyDeviceToHost) != npuSuccess) return 36;
  if (std::strcmp(back, "forked") != 0) return 37;
  // Work still queued at exit: the child's own hook discards it.
  if (npuStreamSetTaskDelay(s, 50'000) != npuSuccess) return 38;
  for (int i = 0; i < 20; ++i) {
    if (npuLaunchHostFunc(
            s, [](void*) {}, nullptr) != npuSuccess) {
      return 39;
    }
  }
  return 0;
}

TEST(ForkBeforeUseTest, ChildOfAParentThatNeverUsedNpurtWorks) {
  // A fresh process: this one's runtime is up already (other tests).
  NPURT_RUN_IN_CHILD_WITH_ENV({});
  const pid_t pid = fork();  // no npurt call before: no executor threads
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) std::exit(goodForkChecks());  // exit(): the child's hook runs
  const int status = waitChild(pid);
  ASSERT_NE(status, -1) << "the forked child hung";
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "first failed check in the child";
  // And the parent may start using npurt afterwards.
  int state = -1;
  ASSERT_NPU_OK(npuGetForkState(&state));
  EXPECT_EQ(state, 0);
  auto s = npurt::StreamHandle::create();
  std::atomic<int> ran{0};
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_fork", [&] { ++ran; }));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace npurt_test
