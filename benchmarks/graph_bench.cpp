// Eager launches against graph replay: 100 small (empty) tasks enqueued one
// by one with npurt::launch, against one npuGraphLaunch of a graph captured
// from the same 100 launches, each followed by npuStreamSynchronize. Two
// graph shapes: a chain (one lane) and two branches of 50 forked from and
// joined back into the launch stream (two lanes, run concurrently).
//
// Reported per iteration (100 tasks): real time end to end, and the counter
// host_us, the time the host thread spent issuing the work (the 100 launches,
// or the one graph launch) before it synchronized. See docs/PERFORMANCE.md.
#include <vector>

#include "bench_common.h"
#include "npurt/npurt.hpp"

namespace npubench {
namespace {

constexpr int kTasks = 100;

void emptyHostFn(void* /*userData*/) {}

bool warmUp(benchmark::State& state, npuStream_t s) {
  return ok(state, npuLaunchHostFunc(s, &emptyHostFn, nullptr)) &&
         ok(state, npuStreamSynchronize(s));
}

void BM_Eager(benchmark::State& state) {
  npurt::StreamHandle s = npurt::StreamHandle::create();
  if (!warmUp(state, s.get())) return;
  int64_t hostNs = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kTasks; ++i) {
      if (!ok(state, npurt::launch(s.get(), "empty", [] {}))) return;
    }
    hostNs += nsSince(start);
    if (!ok(state, npuStreamSynchronize(s.get()))) return;
  }
  state.counters["host_us"] =
      benchmark::Counter(static_cast<double>(hostNs) / 1e3, benchmark::Counter::kAvgIterations);
}

// Captures kTasks empty launches on `origin`; with branches == 2 half of them
// go to a second stream forked from and joined back into the origin.
bool capture(benchmark::State& state, npuStream_t origin, int branches, npurt::GraphHandle& graph) {
  npurt::StreamHandle side = npurt::StreamHandle::create();
  npurt::EventHandle fork = npurt::EventHandle::create(npuEventDisableTiming);
  npurt::EventHandle join = npurt::EventHandle::create(npuEventDisableTiming);
  if (!ok(state, npuStreamBeginCapture(origin, npuStreamCaptureModeGlobal))) return false;
  if (branches == 2 && (!ok(state, npuEventRecord(fork.get(), origin)) ||
                        !ok(state, npuStreamWaitEvent(side.get(), fork.get(), 0)))) {
    return false;
  }
  for (int i = 0; i < kTasks; ++i) {
    const npuStream_t s = (branches == 2 && i % 2 == 1) ? side.get() : origin;
    if (!ok(state, npurt::launch(s, "empty", [] {}))) return false;
  }
  if (branches == 2 && (!ok(state, npuEventRecord(join.get(), side.get())) ||
                        !ok(state, npuStreamWaitEvent(origin, join.get(), 0)))) {
    return false;
  }
  npuGraph_t raw = nullptr;
  if (!ok(state, npuStreamEndCapture(origin, &raw))) return false;
  graph = npurt::GraphHandle(raw);
  return true;
}

void BM_Graph(benchmark::State& state) {
  const int branches = static_cast<int>(state.range(0));
  npurt::StreamHandle s = npurt::StreamHandle::create();
  if (!warmUp(state, s.get())) return;
  npurt::GraphHandle graph;
  if (!capture(state, s.get(), branches, graph)) return;
  npuGraphExec_t raw = nullptr;
  if (!ok(state, npuGraphInstantiate(&raw, graph.get(), 0))) return;
  npurt::GraphExecHandle exec(raw);
  int64_t hostNs = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    if (!ok(state, npuGraphLaunch(exec.get(), s.get()))) return;
    hostNs += nsSince(start);
    if (!ok(state, npuStreamSynchronize(s.get()))) return;
  }
  state.counters["host_us"] =
      benchmark::Counter(static_cast<double>(hostNs) / 1e3, benchmark::Counter::kAvgIterations);
}

}  // namespace

void registerGraphBenchmarks() {
  benchmark::RegisterBenchmark(kGraphEager, &BM_Eager)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(kGraphReplay, &BM_Graph)
      ->ArgName("branches")
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

}  // namespace npubench
