// Covers Note [Shutdown order]: a process that returns from main with work
// pending exits with status 0, promptly (queued work is discarded, not
// drained), calls release of every discarded task, refuses later work with
// npuErrorRuntimeShutdown (frees and destroys succeed as no-ops), gives up on
// a task that never returns after NPU_SIM_EXIT_TIMEOUT_MS and writes the
// NPU_SIM_TRACE file. No death tests:
// each case runs npurt_exit_helper (exit_helper.cpp) as a child process.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"

#ifndef NPURT_EXIT_HELPER
#error "NPURT_EXIT_HELPER must name the exit helper executable"
#endif

namespace npurt_test {
namespace {

// If queued work were drained instead of discarded, "pending" would take
// about 20 s per stream; a correct runtime exits in well under this.
constexpr std::chrono::seconds kExitTimeout{12};

class ExitTest : public ::testing::Test {
 protected:
  ChildResult runHelper(std::vector<std::string> args, const EnvOverrides& env = {}) {
    args.insert(args.begin(), NPURT_EXIT_HELPER);
    return runChild(args, env, kExitTimeout);
  }
};

TEST_F(ExitTest, IdleProcessExitsCleanly) {
  ChildResult r = runHelper({"idle"});
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_NE(r.output.find("ok idle"), std::string::npos) << r.output;
}

TEST_F(ExitTest, ExitWithPendingWorkNeitherHangsNorCrashes) {
  ChildResult r = runHelper({"pending"});
  ASSERT_FALSE(r.timedOut) << "exit waited for queued work (or hung): " << r.describe();
  EXPECT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.output.find("ok queued"), std::string::npos) << r.output;
}

TEST_F(ExitTest, DiscardedTasksAreReleasedExactlyOnce) {
  ChildResult r = runHelper({"pending"});
  ASSERT_TRUE(r.exited) << r.describe();
  // The helper prints launched/released after the runtime's exit hook ran and
  // exits with 4 if they differ.
  const size_t at = r.output.find("launched=");
  ASSERT_NE(at, std::string::npos) << r.output;
  long launched = -1, released = -2, ran = -1;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at, "launched=%ld released=%ld ran=%ld", &launched,
                        &released, &ran),
            3)
      << r.output;
  EXPECT_EQ(launched, released) << r.output;
  EXPECT_LT(ran, launched) << "queued work must be discarded, not drained";
  EXPECT_NE(r.exitCode, 4) << r.output;
}

TEST_F(ExitTest, CallsAfterShutdownReturnRuntimeShutdown) {
  ChildResult r = runHelper({"pending", "late-call"});
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_NE(r.output.find("late_launch=npuErrorRuntimeShutdown"), std::string::npos) << r.output;
  EXPECT_EQ(r.exitCode, 0) << r.describe();
}

TEST_F(ExitTest, FreesAfterShutdownAreHarmlessNoOps) {
  ChildResult r = runHelper({"pending", "late-free"});
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.output.find("late_free=npuSuccess"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("late_free=npuError"), std::string::npos) << r.output;
}

TEST_F(ExitTest, ATaskThatNeverReturnsDoesNotBlockExit) {
  const auto start = std::chrono::steady_clock::now();
  ChildResult r = runHelper({"blocked"});
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.timedOut) << "exit waited for the blocked task: " << r.describe();
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.output.find("ok blocked"), std::string::npos) << r.output;
  // The other stream's chain is discarded and released as usual.
  EXPECT_NE(r.output.find("launched=100 released=100"), std::string::npos) << r.output;
  RecordProperty("exit_seconds", std::to_string(seconds));
}

TEST_F(ExitTest, ExitTimeoutIsConfigurable) {
  ChildResult r = runHelper({"blocked", "late-free"}, {{"NPU_SIM_EXIT_TIMEOUT_MS", "0"}});
  ASSERT_FALSE(r.timedOut) << r.describe();
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(r.output.find("late_free=npuError"), std::string::npos) << r.output;
}

TEST_F(ExitTest, ForkedChildOfAnInitialisedParentExitsCleanly) {
  // Note [Fork]: the child's exit hook must not join the parent's threads.
  // LeakSanitizer cannot stop the world in the forked child of a
  // multithreaded process (it hangs at exit): off for this helper.
  const char* asan = std::getenv("ASAN_OPTIONS");
  ChildResult r = runHelper(
      {"fork"}, {{"ASAN_OPTIONS", std::string(asan != nullptr ? asan : "") + ":detect_leaks=0"}});
  ASSERT_FALSE(r.timedOut) << r.describe();
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.output.find("child ok"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("child exit hooks ok"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("child_status=0"), std::string::npos) << r.output;
}

TEST_F(ExitTest, TraceFileIsWrittenAtExit) {
  const std::string path = tempPath(".exit.trace.json");
  ChildResult r = runHelper({"trace"}, {{"NPU_SIM_TRACE", path}});
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  std::string text = readFile(path);
  unlink(path.c_str());
  ASSERT_FALSE(text.empty()) << "no trace written to " << path;
  std::string error;
  auto doc = parseJson(text, &error);
  ASSERT_TRUE(doc.has_value()) << error;
  ASSERT_TRUE(doc->has("traceEvents"));
  bool sawA = false, sawB = false;
  for (const Json& e : doc->at("traceEvents").array) {
    if (!e.has("name") || !e.has("ph") || e.at("ph").string != "X") continue;
    sawA = sawA || e.at("name").string == "traced_on_a";
    sawB = sawB || e.at("name").string == "traced_on_b";
  }
  EXPECT_TRUE(sawA);
  EXPECT_TRUE(sawB);
}

}  // namespace
}  // namespace npurt_test
