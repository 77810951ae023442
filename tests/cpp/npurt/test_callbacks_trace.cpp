// Covers the notifications and the trace: stream-destroy callbacks (called on
// the destroying thread with the right stream and device, before the handle
// is invalidated, not after unregistering) and the Chrome trace written by
// npuTraceWrite (valid JSON with traceEvents, one complete "X" event per task
// with its name, one process per device, one thread lane per stream, named by
// thread_name metadata; start clears, stop stops recording).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

struct DestroyRecord {
  npuStream_t stream;
  int device;
  std::thread::id thread;
  bool handleStillValid;
  bool acceptedWork;
};

struct CallbackLog {
  std::mutex mutex;
  std::vector<DestroyRecord> records;
};

// Counts the tasks the callback enqueues. A global, not a CallbackLog member:
// those tasks may run after the test's log went out of scope.
std::atomic<int> gLateTaskRuns{0};

void onDestroy(npuStream_t stream, int device, void* user) {
  auto* log = static_cast<CallbackLog*>(user);
  uint64_t id = 0;
  bool valid = npuStreamGetId(stream, &id) == npuSuccess;
  bool accepted = npuLaunchHostFunc(
                      stream, [](void*) { gLateTaskRuns++; }, nullptr) == npuSuccess;
  std::lock_guard<std::mutex> lock(log->mutex);
  log->records.push_back({stream, device, std::this_thread::get_id(), valid, accepted});
}

class CallbackTest : public NpurtTest {
 protected:
  void TearDown() override {
    for (uint64_t h : handles_) (void)npuUnregisterStreamDestroyCallback(h);
    NpurtTest::TearDown();
  }
  uint64_t registerLog(CallbackLog* log) {
    uint64_t handle = 0;
    EXPECT_NPU_OK(npuRegisterStreamDestroyCallback(&onDestroy, log, &handle));
    handles_.push_back(handle);
    return handle;
  }
  std::vector<uint64_t> handles_;
};

TEST_F(CallbackTest, CalledOnDestroyWithStreamAndDeviceBeforeInvalidation) {
  CallbackLog log;
  registerLog(&log);
  const int lateBefore = gLateTaskRuns.load();
  npuStream_t s = nullptr;
  {
    npurt::DeviceGuard guard(1);
    ASSERT_NPU_OK(npuStreamCreate(&s));
  }
  ASSERT_NPU_OK(npuStreamDestroy(s));
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    ASSERT_EQ(log.records.size(), 1u);
    EXPECT_EQ(log.records[0].stream, s);
    EXPECT_EQ(log.records[0].device, 1);
    EXPECT_EQ(log.records[0].thread, std::this_thread::get_id());
    EXPECT_TRUE(log.records[0].handleStillValid);
    EXPECT_TRUE(log.records[0].acceptedWork);
  }
  npurt::DeviceGuard guard(1);
  ASSERT_NPU_OK(npuDeviceSynchronize());
  EXPECT_EQ(gLateTaskRuns.load() - lateBefore, 1) << "work enqueued by the callback still runs";
}

TEST_F(CallbackTest, EveryRegisteredCallbackIsCalledWithItsUserData) {
  CallbackLog a, b;
  uint64_t ha = registerLog(&a);
  uint64_t hb = registerLog(&b);
  EXPECT_NE(ha, hb);
  auto s = makeStream();
  npuStream_t raw = s.get();
  s.reset();
  std::lock_guard<std::mutex> la(a.mutex), lb(b.mutex);
  ASSERT_EQ(a.records.size(), 1u);
  ASSERT_EQ(b.records.size(), 1u);
  EXPECT_EQ(a.records[0].stream, raw);
  EXPECT_EQ(b.records[0].stream, raw);
}

TEST_F(CallbackTest, NotCalledAfterUnregister) {
  CallbackLog log;
  uint64_t h = registerLog(&log);
  ASSERT_NPU_OK(npuUnregisterStreamDestroyCallback(h));
  EXPECT_NPU(npuErrorInvalidValue, npuUnregisterStreamDestroyCallback(h)) << "twice";
  auto s = makeStream();
  s.reset();
  std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_TRUE(log.records.empty());
}

TEST_F(CallbackTest, NotCalledForFailedDestroy) {
  CallbackLog log;
  registerLog(&log);
  npuStream_t s = nullptr;
  ASSERT_NPU_OK(npuStreamCreate(&s));
  ASSERT_NPU_OK(npuStreamDestroy(s));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuStreamDestroy(s));
  std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.records.size(), 1u);
}

// ---------------------------------------------------------------------------
// Trace
// ---------------------------------------------------------------------------

std::string idKey(const Json& v) {
  if (v.kind == Json::Kind::Number) return std::to_string(static_cast<long long>(v.number));
  if (v.kind == Json::Kind::String) return "s:" + v.string;
  return "?";
}

class TraceTest : public NpurtTest {
 protected:
  void TearDown() override {
    for (const auto& p : files_) unlink(p.c_str());
    NpurtTest::TearDown();
  }
  // Writes the trace and parses it; fails the test if it is not valid JSON.
  Json writeAndParse() {
    files_.push_back(tempPath(".trace.json"));
    EXPECT_NPU_OK(npuTraceWrite(files_.back().c_str()));
    std::string text = readFile(files_.back());
    std::string error;
    auto doc = parseJson(text, &error);
    EXPECT_TRUE(doc.has_value()) << error << "\n" << text.substr(0, 2000);
    return doc.value_or(Json{});
  }
  static std::vector<const Json*> events(const Json& doc, const std::string& ph) {
    std::vector<const Json*> out;
    if (doc.kind != Json::Kind::Object || !doc.has("traceEvents")) return out;
    for (const Json& e : doc.at("traceEvents").array) {
      if (e.kind == Json::Kind::Object && e.has("ph") && e.at("ph").string == ph) {
        out.push_back(&e);
      }
    }
    return out;
  }
  std::vector<std::string> files_;
};

TEST_F(TraceTest, TraceOfTwoStreamsOnTwoDevices) {
  ASSERT_NPU_OK(npuTraceStart());
  auto s0 = makeStream(0);
  auto s1 = makeStream(1);
  auto s0b = makeStream(0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_NPU_OK(npurt::launch(s0.get(), "alpha_task", [] {}));
    ASSERT_NPU_OK(npurt::launch(s1.get(), "beta_task", [] {}));
    ASSERT_NPU_OK(npurt::launch(s0b.get(), "gamma_task", [] {}));
  }
  std::string dynamicName = "delta_task_";
  dynamicName += "\"quoted\"";
  ASSERT_NPU_OK(npurt::launch(
      s1.get(), dynamicName.c_str(), [] {}, /*copyName=*/true));
  ASSERT_NPU_OK(npuStreamSynchronize(s0.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s0b.get()));
  ASSERT_NPU_OK(npuTraceStop());

  Json doc = writeAndParse();
  ASSERT_EQ(doc.kind, Json::Kind::Object);
  ASSERT_TRUE(doc.has("traceEvents"));
  ASSERT_EQ(doc.at("traceEvents").kind, Json::Kind::Array);

  // name -> set of (pid, tid) lanes its events were drawn in.
  std::map<std::string, std::set<std::pair<std::string, std::string>>> lanes;
  std::map<std::string, int> counts;
  for (const Json* e : events(doc, "X")) {
    ASSERT_TRUE(e->has("name") && e->has("ts") && e->has("dur") && e->has("pid") && e->has("tid"));
    EXPECT_EQ(e->at("ts").kind, Json::Kind::Number);
    EXPECT_GE(e->at("dur").number, 0.0);
    const std::string& name = e->at("name").string;
    lanes[name].insert({idKey(e->at("pid")), idKey(e->at("tid"))});
    counts[name]++;
  }
  EXPECT_EQ(counts["alpha_task"], 3);
  EXPECT_EQ(counts["beta_task"], 3);
  EXPECT_EQ(counts["gamma_task"], 3);
  EXPECT_EQ(counts["delta_task_\"quoted\""], 1) << "escaped names must survive";
  for (const char* name : {"alpha_task", "beta_task", "gamma_task"}) {
    EXPECT_EQ(lanes[name].size(), 1u) << name << " must be in one lane (its stream)";
  }
  if (lanes["alpha_task"].empty() || lanes["beta_task"].empty() || lanes["gamma_task"].empty()) {
    return;
  }
  auto alpha = *lanes["alpha_task"].begin();
  auto beta = *lanes["beta_task"].begin();
  auto gamma = *lanes["gamma_task"].begin();
  EXPECT_NE(alpha.first, beta.first) << "one process per device";
  EXPECT_EQ(alpha.first, gamma.first) << "streams of one device share its process";
  EXPECT_NE(alpha, gamma) << "one thread lane per stream";
  EXPECT_EQ(*lanes["delta_task_\"quoted\""].begin(), beta);

  std::set<std::pair<std::string, std::string>> named;
  for (const Json* m : events(doc, "M")) {
    if (m->has("name") && m->at("name").string == "thread_name" && m->has("args") &&
        m->at("args").has("name") && m->has("pid") && m->has("tid")) {
      EXPECT_FALSE(m->at("args").at("name").string.empty());
      named.insert({idKey(m->at("pid")), idKey(m->at("tid"))});
    }
  }
  for (const auto& lane : {alpha, beta, gamma}) {
    EXPECT_EQ(named.count(lane), 1u)
        << "lane " << lane.first << "/" << lane.second << " has no thread_name metadata";
  }
}

TEST_F(TraceTest, StartClearsAndStopStopsRecording) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuTraceStart());
  ASSERT_NPU_OK(npurt::launch(s.get(), "before_restart", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuTraceStart());  // clears what was recorded
  ASSERT_NPU_OK(npurt::launch(s.get(), "while_recording", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuTraceStop());
  ASSERT_NPU_OK(npurt::launch(s.get(), "after_stop", [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  Json doc = writeAndParse();
  std::map<std::string, int> counts;
  for (const Json* e : events(doc, "X")) counts[e->at("name").string]++;
  EXPECT_EQ(counts["before_restart"], 0);
  EXPECT_EQ(counts["while_recording"], 1);
  EXPECT_EQ(counts["after_stop"], 0);
}

TEST_F(TraceTest, TaskIntervalsFollowStreamOrder) {
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 2'000));
  ASSERT_NPU_OK(npuTraceStart());
  static const char* const kNames[] = {"step0", "step1", "step2", "step3"};
  for (const char* name : kNames) ASSERT_NPU_OK(npurt::launch(s.get(), name, [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  ASSERT_NPU_OK(npuTraceStop());
  Json doc = writeAndParse();
  std::map<std::string, std::pair<double, double>> spans;
  for (const Json* e : events(doc, "X")) {
    spans[e->at("name").string] = {e->at("ts").number, e->at("ts").number + e->at("dur").number};
  }
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(spans.count(kNames[i - 1]) && spans.count(kNames[i]));
    EXPECT_LE(spans[kNames[i - 1]].second, spans[kNames[i]].first + 1.0)
        << kNames[i] << " started before " << kNames[i - 1] << " ended";
  }
}

TEST_F(TraceTest, EmptyTraceIsStillValidJson) {
  ASSERT_NPU_OK(npuTraceStart());
  ASSERT_NPU_OK(npuTraceStop());
  Json doc = writeAndParse();
  ASSERT_EQ(doc.kind, Json::Kind::Object);
  ASSERT_TRUE(doc.has("traceEvents"));
  EXPECT_TRUE(events(doc, "X").empty());
}

}  // namespace
}  // namespace npurt_test
