// The race detector's cost, off and on, in one run: 100 tasks that each
// declare one 4 KiB range of a buffer (reads and writes, two streams ordered
// by an event per iteration), enqueued with npurt::launch and followed by a
// device synchronize. The detector is switched with npuRaceCheckSetMode
// around each benchmark, so both rows run in the same process on the same
// machine state. Reported per iteration (100 tasks): real time, and the
// counter host_us, the time spent launching. See docs/PERFORMANCE.md.
#include "bench_common.h"
#include "npurt/npurt.hpp"

namespace npubench {
namespace {

constexpr int kTasks = 100;
constexpr size_t kRange = 4096;

void BM_RaceCheck(benchmark::State& state) {
  const auto mode = static_cast<npuRaceCheckMode>(state.range(0));
  npurt::StreamHandle a = npurt::StreamHandle::create();
  npurt::StreamHandle b = npurt::StreamHandle::create();
  npurt::EventHandle e = npurt::EventHandle::create(npuEventDisableTiming);
  void* buf = nullptr;
  if (!ok(state, npuMalloc(&buf, kRange * kTasks))) return;
  if (!ok(state, npuRaceCheckSetMode(mode))) return;
  auto* base = static_cast<char*>(buf);
  int64_t hostNs = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kTasks / 2; ++i) {
      if (!ok(state, npurt::launch(a.get(), "writer", {{base + i * kRange, kRange, npuMemAccessWrite}},
                                   [] {}))) {
        return;
      }
    }
    if (!ok(state, npuEventRecord(e.get(), a.get())) ||
        !ok(state, npuStreamWaitEvent(b.get(), e.get(), 0))) {
      return;
    }
    for (int i = 0; i < kTasks / 2; ++i) {
      if (!ok(state, npurt::launch(b.get(), "reader", {{base + i * kRange, kRange, npuMemAccessRead}},
                                   [] {}))) {
        return;
      }
    }
    hostNs += nsSince(start);
    if (!ok(state, npuDeviceSynchronize())) return;
  }
  state.counters["host_us"] =
      benchmark::Counter(static_cast<double>(hostNs) / 1e3, benchmark::Counter::kAvgIterations);
  uint64_t reports = 0;
  (void)npuRaceCheckGetReportCount(&reports);
  if (reports != 0) state.SkipWithError("the benchmark's tasks are ordered: no race expected");
  (void)npuRaceCheckSetMode(npuRaceCheckOff);
  (void)npuFree(buf);
}

}  // namespace

void registerRaceCheckBenchmarks() {
  benchmark::RegisterBenchmark(kRaceCheck, BM_RaceCheck)
      ->ArgName("mode")
      ->Arg(npuRaceCheckOff)
      ->Arg(npuRaceCheckError)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace npubench
