// Round trips between the host and a stream: how long a host thread waits to
// learn that (nothing | an event record | one empty task) has completed. These
// bound the overhead of every synchronize the framework layer issues.
//
// All run on one host thread against one stream of device 0, which is idle at
// the start of every iteration, so each iteration includes waking an executor
// (except the idle-synchronize and completed-query cases, which must not need
// one).
#include <cstdint>

#include "baseline_stream.h"
#include "bench_common.h"
#include "npurt/npurt.hpp"

namespace npubench {
namespace {

void emptyHostFn(void* /*userData*/) {}

// Owns a fresh stream and event for one benchmark run.
struct StreamAndEvent {
  npurt::StreamHandle stream;
  npurt::EventHandle event;
  bool create(benchmark::State& state) {
    npuStream_t s = nullptr;
    if (!ok(state, npuStreamCreate(&s))) return false;
    stream = npurt::StreamHandle(s);
    npuEvent_t e = nullptr;
    if (!ok(state, npuEventCreate(&e))) return false;
    event = npurt::EventHandle(e);
    // Warm-up: starts the device's executors.
    return ok(state, npuLaunchHostFunc(s, &emptyHostFn, nullptr)) &&
           ok(state, npuStreamSynchronize(s));
  }
};

// npuStreamSynchronize on a stream with nothing queued: the cost of asking.
void BM_SynchronizeIdle(benchmark::State& state) {
  StreamAndEvent r;
  if (!r.create(state)) return;
  for (auto _ : state) {
    if (!ok(state, npuStreamSynchronize(r.stream.get()))) break;
  }
}

// npuEventQuery of a version that has already completed: a pure lookup.
void BM_EventQueryCompleted(benchmark::State& state) {
  StreamAndEvent r;
  if (!r.create(state)) return;
  if (!ok(state, npuEventRecord(r.event.get(), r.stream.get())) ||
      !ok(state, npuEventSynchronize(r.event.get()))) {
    return;
  }
  for (auto _ : state) {
    if (!ok(state, npuEventQuery(r.event.get()))) break;
  }
}

// npuEventRecord, then npuEventQuery polled until the new version completes
// (what a framework's "is this tensor ready" check does). queries_per_trip
// shows how many polls that took.
void BM_EventRecordQuery(benchmark::State& state) {
  StreamAndEvent r;
  if (!r.create(state)) return;
  int64_t queries = 0;
  for (auto _ : state) {
    if (!ok(state, npuEventRecord(r.event.get(), r.stream.get()))) break;
    npuError_t status = npuErrorNotReady;
    while (status == npuErrorNotReady) {
      status = npuEventQuery(r.event.get());
      ++queries;
    }
    if (!ok(state, status)) break;
  }
  state.counters["queries_per_trip"] =
      benchmark::Counter(static_cast<double>(queries), benchmark::Counter::kAvgIterations);
}

// npuEventRecord + npuEventSynchronize (blocking wait for the new version).
void BM_EventRecordSynchronize(benchmark::State& state) {
  StreamAndEvent r;
  if (!r.create(state)) return;
  for (auto _ : state) {
    if (!ok(state, npuEventRecord(r.event.get(), r.stream.get())) ||
        !ok(state, npuEventSynchronize(r.event.get()))) {
      break;
    }
  }
}

// One empty host function + npuStreamSynchronize: the minimal "launch and
// wait" latency.
void BM_TaskSynchronize(benchmark::State& state) {
  StreamAndEvent r;
  if (!r.create(state)) return;
  for (auto _ : state) {
    if (!ok(state, npuLaunchHostFunc(r.stream.get(), &emptyHostFn, nullptr)) ||
        !ok(state, npuStreamSynchronize(r.stream.get()))) {
      break;
    }
  }
}

// The same on the baseline stream, for scale.
void BM_BaselineTaskSynchronize(benchmark::State& state) {
  BaselineStream stream;
  stream.enqueue([] {});
  stream.synchronize();
  for (auto _ : state) {
    stream.enqueue([] {});
    stream.synchronize();
  }
}

}  // namespace

void registerSyncBenchmarks() {
  // Real time: these wait for executor threads, which CPU time does not see.
  const auto add = [](const char* name, void (*fn)(benchmark::State&), benchmark::TimeUnit unit) {
    benchmark::RegisterBenchmark(name, fn)->Unit(unit)->UseRealTime();
  };
  add("sync/npuStreamSynchronize(idle)", &BM_SynchronizeIdle, benchmark::kNanosecond);
  add("sync/npuEventQuery(completed)", &BM_EventQueryCompleted, benchmark::kNanosecond);
  add("sync/npuEventRecord+poll_npuEventQuery", &BM_EventRecordQuery, benchmark::kMicrosecond);
  add("sync/npuEventRecord+npuEventSynchronize", &BM_EventRecordSynchronize,
      benchmark::kMicrosecond);
  add("sync/npuLaunchHostFunc+npuStreamSynchronize", &BM_TaskSynchronize, benchmark::kMicrosecond);
  add("sync/baseline_enqueue+synchronize", &BM_BaselineTaskSynchronize, benchmark::kMicrosecond);
}

}  // namespace npubench
