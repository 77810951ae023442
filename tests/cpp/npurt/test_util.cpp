// Implementation of the shared helpers in test_util.h: gates, the base
// fixture, child processes (posix_spawn + poll, no sleeps) and the JSON reader.
#include "test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace npurt_test {

::testing::AssertionResult npuStatusIs(const char* expectedExpr, const char* actualExpr,
                                       npuError_t expected, npuError_t actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  const char* detail = npuGetLastErrorMessage();
  return ::testing::AssertionFailure()
         << actualExpr << " returned " << npuGetErrorName(actual) << ", expected "
         << npuGetErrorName(expected) << " (" << expectedExpr << ")"
         << (actual != npuSuccess ? std::string("; last error message: \"") + detail + "\""
                                  : std::string());
}

// ---------------------------------------------------------------------------
// Gates
// ---------------------------------------------------------------------------

void Gate::open() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
  }
  cv_.notify_all();
}

void Gate::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return open_; });
}

bool Gate::waitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return open_; });
}

bool Gate::isOpen() {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

npuError_t ScopedGate::launchBlocker(npuStream_t stream, const char* name) {
  return npurt::launch(stream, name, [gate = gate_, started = started_] {
    started->open();
    gate->wait();
  });
}

bool ScopedGate::waitStarted() { return started_->waitFor(kHangTimeout); }

// ---------------------------------------------------------------------------
// Base fixture
// ---------------------------------------------------------------------------

void NpurtTest::SetUp() {
  int count = 0;
  ASSERT_NPU_OK(npuGetDeviceCount(&count));
  ASSERT_GE(count, 1);
}

void NpurtTest::TearDown() {
  int count = 0;
  if (npuGetDeviceCount(&count) != npuSuccess) return;
  for (int d = 0; d < count; ++d) {
    if (npuSetDevice(d) != npuSuccess) continue;
    (void)npuDeviceSynchronize();  // drains and clears a pending failure
    (void)npuDeviceSynchronize();
  }
  (void)npuSetDevice(0);
  (void)npuSetTaskDelay(0);
  for (npuFaultKind kind : {npuFaultLaunch, npuFaultTask, npuFaultCopy, npuFaultAlloc}) {
    (void)npuSetFaultInjection(kind, 0);
  }
  (void)npuTraceStop();
}

npurt::StreamHandle NpurtTest::makeStream(int device, unsigned flags, int priority) {
  npurt::DeviceGuard guard(device);
  return npurt::StreamHandle::create(flags, priority);
}

npurt::EventHandle NpurtTest::makeEvent(unsigned flags) {
  return npurt::EventHandle::create(flags);
}

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------

std::string ChildResult::describe() const {
  std::ostringstream out;
  if (timedOut) {
    out << "child timed out and was killed";
  } else if (exited) {
    out << "child exited with status " << exitCode;
  } else {
    out << "child killed by signal " << signal << " (" << strsignal(signal) << ")";
  }
  out << "; output:\n" << output;
  return out.str();
}

namespace {

constexpr const char* kChildMarker = "NPURT_TEST_CHILD";

std::vector<std::string> childEnvironment(const EnvOverrides& env) {
  std::vector<std::string> result;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (key.rfind("NPU_SIM_", 0) == 0) continue;  // the child sees only `env`
    bool overridden = false;
    for (const auto& [k, v] : env) overridden = overridden || k == key;
    if (!overridden) result.push_back(entry);
  }
  for (const auto& [k, v] : env) {
    if (v.has_value()) result.push_back(k + "=" + *v);
  }
  return result;
}

}  // namespace

ChildResult runChild(const std::vector<std::string>& argv, const EnvOverrides& env,
                     std::chrono::seconds timeout) {
  ChildResult result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe2 failed: ") + std::strerror(errno);
    return result;
  }
  std::vector<std::string> envStrings = childEnvironment(env);
  std::vector<char*> envp;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStrings = argv;
  std::vector<char*> args;
  for (auto& s : argStrings) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    result.output = std::string("posix_spawn failed: ") + std::strerror(rc);
    return result;
  }

  // Read until EOF (the child and everything it spawned closed the pipe) or
  // the deadline; poll() bounds every wait, nothing sleeps.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      result.timedOut = true;
      break;
    }
    ssize_t got = read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    result.output.append(buffer, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (result.timedOut) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!result.timedOut) {
    if (WIFEXITED(status)) {
      result.exited = true;
      result.exitCode = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result.signal = WTERMSIG(status);
    }
  }
  return result;
}

bool isTestChild() { return std::getenv(kChildMarker) != nullptr; }

void runCurrentTestInChild(const EnvOverrides& env) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  ASSERT_NE(info, nullptr);
  std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  EnvOverrides childEnv = env;
  childEnv.emplace_back(kChildMarker, "1");
  ChildResult r =
      runChild({"/proc/self/exe", filter, "--gtest_color=no"}, childEnv, std::chrono::seconds(90));
  std::string envText;
  for (const auto& [k, v] : env) envText += " " + k + "=" + v.value_or("<unset>");
  EXPECT_TRUE(r.exited && r.exitCode == 0)
      << "test re-run in a child with" << envText << ": " << r.describe();
  // A child that ran zero tests would "pass" vacuously.
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

// ---------------------------------------------------------------------------
// JSON reader
// ---------------------------------------------------------------------------

namespace {

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  std::optional<Json> document(std::string* error) {
    Json value;
    if (!parseValue(value, 0) || (skipSpace(), pos_ != s_.size())) {
      if (error != nullptr) *error = "malformed JSON near offset " + std::to_string(pos_);
      return std::nullopt;
    }
    return value;
  }

 private:
  void skipSpace() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) != nullptr) ++pos_;
  }
  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  bool parseString(std::string& out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    ++pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (pos_ + 4 > s_.size()) return false;
          for (int i = 0; i < 4; ++i) {
            if (std::isxdigit(static_cast<unsigned char>(s_[pos_ + i])) == 0) return false;
          }
          out += '?';  // code points are not needed by the tests
          pos_ += 4;
          break;
        default:
          return false;
      }
    }
    return false;
  }
  bool parseValue(Json& v, int depth) {
    if (depth > 64) return false;
    skipSpace();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++pos_;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      for (;;) {
        skipSpace();
        std::string key;
        if (!parseString(key)) return false;
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_++] != ':') return false;
        Json member;
        if (!parseValue(member, depth + 1)) return false;
        v.object[key] = std::move(member);
        skipSpace();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        return s_[pos_++] == '}';
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::Array;
      ++pos_;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      for (;;) {
        Json element;
        if (!parseValue(element, depth + 1)) return false;
        v.array.push_back(std::move(element));
        skipSpace();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        return s_[pos_++] == ']';
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::String;
      return parseString(v.string);
    }
    if (literal("true")) return v.kind = Json::Kind::Bool, v.boolean = true, true;
    if (literal("false")) return v.kind = Json::Kind::Bool, v.boolean = false, true;
    if (literal("null")) return v.kind = Json::Kind::Null, true;
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    double d = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(d)) return false;
    pos_ += static_cast<size_t>(end - begin);
    v.kind = Json::Kind::Number;
    v.number = d;
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<Json> parseJson(const std::string& text, std::string* error) {
  return JsonParser(text).document(error);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string tempPath(const std::string& suffix) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::string base = (dir != nullptr && dir[0] != '\0') ? dir : "/tmp";
  return base + "/npurt_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
         suffix;
}

double stressScale() {
  const char* text = std::getenv("NPURT_STRESS_SCALE");
  if (text == nullptr) return 1.0;
  double scale = std::strtod(text, nullptr);
  return scale > 0 ? scale : 1.0;
}

}  // namespace npurt_test
