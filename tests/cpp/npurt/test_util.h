// Shared helpers of the npurt conformance suite: the base fixture, gates that
// hold a task on the device until the test releases it, child processes (for
// tests that need another runtime configuration or must watch a process exit)
// and a small JSON reader for trace files.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace npurt_test {

// Predicate-formatter for EXPECT_NPU/ASSERT_NPU: compares statuses by name and
// adds the calling thread's last error message (read right after `actual`
// was evaluated) to the failure.
::testing::AssertionResult npuStatusIs(const char* expectedExpr, const char* actualExpr,
                                       npuError_t expected, npuError_t actual);

// Assert a status; support `<< "context"` like every gtest assertion.
#define EXPECT_NPU(expected, expr) EXPECT_PRED_FORMAT2(::npurt_test::npuStatusIs, expected, expr)
#define ASSERT_NPU(expected, expr) ASSERT_PRED_FORMAT2(::npurt_test::npuStatusIs, expected, expr)
#define EXPECT_NPU_OK(expr) EXPECT_NPU(npuSuccess, expr)
#define ASSERT_NPU_OK(expr) ASSERT_NPU(npuSuccess, expr)

// Upper bound for every wait that should finish promptly; reaching it means
// the runtime hung (a failure), never that the machine was slow.
inline constexpr std::chrono::seconds kHangTimeout{30};
inline constexpr int64_t kHangTimeoutUs = 30'000'000;

// A one-shot latch. Tasks block in wait() until the test calls open().
class Gate {
 public:
  void open();
  void wait();
  // Waits at most `timeout`; true if the gate was opened.
  bool waitFor(std::chrono::milliseconds timeout);
  bool isOpen();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Owner of a Gate shared with the tasks that wait on it. The destructor opens
// the gate, so a test that fails early never leaves an executor blocked (which
// would hang the shutdown at process exit).
class ScopedGate {
 public:
  ScopedGate() : gate_(std::make_shared<Gate>()) {}
  ~ScopedGate() { gate_->open(); }
  ScopedGate(const ScopedGate&) = delete;
  ScopedGate& operator=(const ScopedGate&) = delete;

  void open() { gate_->open(); }
  std::shared_ptr<Gate> get() const { return gate_; }

  // Enqueues a task that signals `started()` when it begins and then blocks
  // until the gate opens.
  npuError_t launchBlocker(npuStream_t stream, const char* name = "gate");
  // Blocks until the blocker task has started running on an executor.
  bool waitStarted();

 private:
  std::shared_ptr<Gate> gate_;
  std::shared_ptr<Gate> started_ = std::make_shared<Gate>();
};

// Base fixture: checks the runtime is up and, after each test, drains every
// device, clears pending task failures and resets the global knobs so tests
// do not leak state into each other when run in one process.
class NpurtTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Creates a stream on `device` (the current device is restored).
  static npurt::StreamHandle makeStream(int device = 0, unsigned flags = npuStreamDefault,
                                        int priority = 0);
  static npurt::EventHandle makeEvent(unsigned flags = npuEventDefault);
};

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------

struct ChildResult {
  bool timedOut = false;  // killed after the timeout
  bool exited = false;    // WIFEXITED
  int exitCode = -1;      // WEXITSTATUS
  int signal = 0;         // WTERMSIG if killed by a signal
  std::string output;     // stdout and stderr, interleaved
  std::string describe() const;
};

// Environment change for a child: value std::nullopt removes the variable.
using EnvOverrides = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Runs argv[0] with argv (posix_spawn, no shell), the current environment with
// `env` applied and every other NPU_SIM_* variable removed. Collects output
// until the child exits; kills it after `timeout`.
ChildResult runChild(const std::vector<std::string>& argv, const EnvOverrides& env,
                     std::chrono::seconds timeout = std::chrono::seconds(60));

// True in a process started by runCurrentTestInChild().
bool isTestChild();

// Re-runs the current test (same executable, --gtest_filter=<this test>) in a
// child process with `env`, and expects it to pass.
void runCurrentTestInChild(const EnvOverrides& env);

// Runs the rest of the test body in a child process whose runtime is
// configured by `env` (the configuration is read once per process). In the
// parent the macro runs the child, checks it passed, and returns.
#define NPURT_RUN_IN_CHILD_WITH_ENV(...)                \
  do {                                                  \
    if (!::npurt_test::isTestChild()) {                 \
      ::npurt_test::runCurrentTestInChild(__VA_ARGS__); \
      return;                                           \
    }                                                   \
  } while (0)

// ---------------------------------------------------------------------------
// Minimal JSON reader (for trace files)
// ---------------------------------------------------------------------------

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool has(const std::string& key) const { return object.count(key) != 0; }
  const Json& at(const std::string& key) const { return object.at(key); }
};

// Parses a complete JSON document; std::nullopt (and `error` set) if malformed.
std::optional<Json> parseJson(const std::string& text, std::string* error);

std::string readFile(const std::string& path);
// A fresh path under the temporary directory, removed by the caller.
std::string tempPath(const std::string& suffix);

// NPURT_STRESS_SCALE (default 1.0): factor applied to stress-test sizes so the
// sanitizer builds can run them in reasonable time.
double stressScale();

}  // namespace npurt_test
