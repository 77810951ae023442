// Helper program for test_exit.cpp: sets up work that is still pending when
// it returns from main, so the test can check Note [Shutdown order] (exit
// neither hangs nor crashes, queued work is discarded with its release
// called, later calls fail with npuErrorRuntimeShutdown, the NPU_SIM_TRACE
// file is written).
//
// Usage: npurt_exit_helper <mode> [late-call]
//   idle       initialise the runtime and return
//   pending    long delayed chains on several streams of two devices, plus a
//              stream parked on an event whose record is queued behind a chain
//   trace      a few finished tasks and a pending chain (run with NPU_SIM_TRACE)
//   blocked    a task that never returns (waits on a flag nobody sets), with
//              a pending chain on another stream of the same device
//   fork       pending work, then fork(); the child checks that calls fail
//              with npuErrorInitializationError and returns from main (its
//              exit hook must do nothing); the parent prints child_status=N
//   late-call  also launch on a live stream from an atexit hook that runs
//              after the runtime's own (expects npuErrorRuntimeShutdown)
//   late-free  also free memory and destroy a stream and an event from that
//              hook (expects npuSuccess from each: harmless no-ops)
// Prints "ok" lines on stdout; exits non-zero if a check made at exit fails:
// 3 a call before exit failed, 4 released != launched, 5 late call not
// refused with npuErrorRuntimeShutdown, 6 a late free did not succeed.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

std::atomic<long> gLaunched{0};
std::atomic<long> gReleased{0};
std::atomic<long> gRan{0};
npuStream_t gLiveStream = nullptr;
bool gLateCall = false;
bool gLateFree = false;
bool gForkChild = false;  // the child of "fork" mode
// Released by the late-free hook.
void* gLateDevice = nullptr;
void* gLateHost = nullptr;
char gLateRegistered[4096];
npuEvent_t gLateEvent = nullptr;

// Counts its own release: the runtime must call it exactly once, after the
// task ran or when it was discarded at exit.
struct Counted {
  Counted() = default;
  Counted(Counted&& other) noexcept : owner(std::exchange(other.owner, false)) {}
  Counted(const Counted&) = delete;
  ~Counted() {
    if (owner) gReleased++;
  }
  void operator()() const { gRan++; }
  bool owner = true;
};

void fail(const char* what) {
  std::printf("FAIL %s: %s\n", what, npuGetLastErrorMessage());
  std::fflush(stdout);
  std::exit(3);
}

void check(npuError_t status, const char* what) {
  if (status != npuSuccess) fail(what);
}

// Registered before the first npurt call, so it runs after the runtime's own
// exit hook (atexit handlers run in reverse order of registration).
void afterRuntimeShutdown() {
  if (gForkChild) {
    // The runtime's hook did nothing here (Note [Fork]): nothing was
    // discarded, and the parent's threads were not touched.
    std::printf("child exit hooks ok\n");
    std::fflush(stdout);
    return;
  }
  std::printf("launched=%ld released=%ld ran=%ld\n", gLaunched.load(), gReleased.load(),
              gRan.load());
  std::fflush(stdout);
  // With NPU_SIM_EXIT_TIMEOUT_MS=0 the hook does not wait at all: a task of
  // the chain that happens to be running is abandoned, and then its stream's
  // queued tasks are neither run nor released (Note [Shutdown order]). Only
  // a hook that waits must account for every task.
  const char* timeout = std::getenv("NPU_SIM_EXIT_TIMEOUT_MS");
  const bool waits = timeout == nullptr || std::string(timeout) != "0";
  if (waits && gLaunched.load() != gReleased.load()) _exit(4);
  if (gLateFree) {
    const npuError_t statuses[] = {
        npuFree(gLateDevice),
        npuFreeHost(gLateHost),
        npuHostUnregister(gLateRegistered),
        npuEventDestroy(gLateEvent),
        npuStreamDestroy(gLiveStream),
        npuFree(gLateRegistered),  // not even an allocation: still a no-op
    };
    for (const npuError_t status : statuses) {
      std::printf("late_free=%s\n", npuGetErrorName(status));
      if (status != npuSuccess) _exit(6);
    }
    std::fflush(stdout);
  }
  if (!gLateCall || gLiveStream == nullptr) return;
  npuError_t late = npuLaunchHostFunc(
      gLiveStream, [](void*) {}, nullptr);
  std::printf("late_launch=%s\n", npuGetErrorName(late));
  std::fflush(stdout);
  if (late != npuErrorRuntimeShutdown) _exit(5);
}

void queueChain(npuStream_t s, int tasks) {
  for (int i = 0; i < tasks; ++i) {
    check(npurt::launch(s, "pending_chain", Counted{}), "launch");
    gLaunched++;
  }
}

int runPending() {
  const int chain = 400;
  std::vector<npuStream_t> streams;
  for (int device = 0; device < 2; ++device) {
    check(npuSetDevice(device), "npuSetDevice");
    for (int k = 0; k < 2; ++k) {
      npuStream_t s = nullptr;
      check(npuStreamCreateWithPriority(&s, npuStreamDefault, -k), "npuStreamCreate");
      check(npuStreamSetTaskDelay(s, 50'000), "npuStreamSetTaskDelay");
      streams.push_back(s);
    }
  }
  check(npuSetDevice(0), "npuSetDevice");
  for (npuStream_t s : streams) queueChain(s, chain);  // ~20 s per stream if drained

  // A stream parked on an event whose record is queued behind a long chain.
  npuEvent_t e = nullptr;
  check(npuEventCreate(&e), "npuEventCreate");
  check(npuEventRecord(e, streams[0]), "npuEventRecord");
  npuStream_t parked = nullptr;
  check(npuSetDevice(1), "npuSetDevice");
  check(npuStreamCreate(&parked), "npuStreamCreate parked");
  check(npuStreamWaitEvent(parked, e, 0), "npuStreamWaitEvent");
  queueChain(parked, 10);
  if (npuStreamQuery(parked) != npuErrorNotReady) fail("parked stream should be busy");

  // Memory with a queued asynchronous copy, freed before exit.
  void* d = nullptr;
  static char host[1 << 16];
  check(npuMalloc(&d, sizeof host), "npuMalloc");
  check(npuMemcpyAsync(host, d, sizeof host, npuMemcpyDeviceToHost, parked), "npuMemcpyAsync");
  check(npuFree(d), "npuFree");

  // One destroyed stream still draining, one live stream for the late call.
  check(npuStreamDestroy(streams[1]), "npuStreamDestroy");
  gLiveStream = streams[2];
  std::printf("ok queued\n");
  std::fflush(stdout);
  return 0;  // exit with all of that pending
}

// Allocates what the late-free hook releases.
void prepareLateFree() {
  check(npuMalloc(&gLateDevice, 1024), "npuMalloc");
  check(npuMallocHost(&gLateHost, 1024), "npuMallocHost");
  check(npuHostRegister(gLateRegistered, sizeof gLateRegistered, 0), "npuHostRegister");
  check(npuEventCreate(&gLateEvent), "npuEventCreate");
}

// A task that never returns: the exit hook must give up on it.
std::atomic<bool> gNeverSet{false};
std::atomic<bool> gBlockedStarted{false};

int runBlocked() {
  npuStream_t blocked = nullptr;
  npuStream_t other = nullptr;
  check(npuStreamCreate(&blocked), "npuStreamCreate");
  check(npuStreamCreate(&other), "npuStreamCreate");
  check(npuLaunchHostFunc(
            blocked,
            [](void*) {
              gBlockedStarted = true;
              while (!gNeverSet.load()) usleep(1000);
            },
            nullptr),
        "npuLaunchHostFunc");
  // Behind the blocked task: never released (its stream is left alone).
  check(npuLaunchHostFunc(
            blocked, [](void*) {}, nullptr),
        "npuLaunchHostFunc");
  while (!gBlockedStarted.load()) usleep(100);
  check(npuStreamSetTaskDelay(other, 50'000), "delay");
  queueChain(other, 100);  // discarded and released as usual
  gLiveStream = other;
  std::printf("ok blocked\n");
  std::fflush(stdout);
  return 0;
}

int runFork() {
  npuStream_t s = nullptr;
  check(npuStreamCreate(&s), "npuStreamCreate");
  check(npuStreamSetTaskDelay(s, 50'000), "delay");
  queueChain(s, 100);  // the executors are busy at the fork
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    gForkChild = true;
    int state = -1;
    if (npuGetForkState(&state) != npuSuccess || state != 1) _exit(20);
    if (npuStreamSynchronize(s) != npuErrorInitializationError) _exit(21);
    if (std::strstr(npuGetLastErrorMessage(), "forked child") == nullptr) _exit(22);
    if (npuLaunchHostFunc(
            s, [](void*) {}, nullptr) != npuErrorInitializationError) {
      _exit(23);
    }
    std::printf("child ok\n");
    std::fflush(stdout);
    return 0;  // exit(): the runtime's hook runs in the child and must do nothing
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) fail("waitpid");
  std::printf("child_status=%d\n",
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  std::fflush(stdout);
  return 0;
}

int runTrace() {
  npuStream_t a = nullptr;
  npuStream_t b = nullptr;
  check(npuStreamCreate(&a), "npuStreamCreate");
  check(npuSetDevice(1), "npuSetDevice");
  check(npuStreamCreate(&b), "npuStreamCreate");
  check(npurt::launch(a, "traced_on_a", Counted{}), "launch");
  check(npurt::launch(b, "traced_on_b", Counted{}), "launch");
  gLaunched += 2;
  check(npuStreamSynchronize(a), "sync a");
  check(npuStreamSynchronize(b), "sync b");
  check(npuStreamSetTaskDelay(a, 50'000), "delay");
  queueChain(a, 100);
  gLiveStream = b;
  std::printf("ok traced\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string late = argc == 3 ? argv[2] : "";
  if (argc < 2 || argc > 3 || (argc == 3 && late != "late-call" && late != "late-free")) {
    std::fprintf(stderr, "usage: %s idle|pending|blocked|trace [late-call|late-free]\n", argv[0]);
    return 2;
  }
  gLateCall = late == "late-call";
  gLateFree = late == "late-free";
  std::atexit(&afterRuntimeShutdown);
  int count = 0;
  check(npuGetDeviceCount(&count), "npuGetDeviceCount");
  if (count < 2) fail("needs 2 devices");
  const std::string mode = argv[1];
  if (gLateFree) prepareLateFree();
  if (mode == "idle") {
    std::printf("ok idle\n");
    return 0;
  }
  if (mode == "pending") return runPending();
  if (mode == "trace") return runTrace();
  if (mode == "blocked") return runBlocked();
  if (mode == "fork") return runFork();
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}
