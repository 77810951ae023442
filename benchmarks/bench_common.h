// Shared pieces of npurt_bench: registration entry points of each benchmark
// file, the names the final summary looks results up by, and small helpers.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "npurt/npurt.h"

namespace npubench {

using Clock = std::chrono::steady_clock;

inline int64_t nsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Marks the run as failed with the runtime's message when status is not
// npuSuccess. Returns true on success so call sites read
// `if (!ok(state, npuX(...))) return;`.
inline bool ok(benchmark::State& state, npuError_t status) {
  if (status == npuSuccess) return true;
  std::string message = std::string(npuGetErrorName(status)) + ": " + npuGetLastErrorMessage();
  state.SkipWithError(message.c_str());
  return false;
}

// Benchmark names (the part before the arguments). The summary in main.cpp
// finds results by "<name>/<args>", e.g. "enqueue/npurt::launch/producers:4".
inline constexpr const char* kEnqueueLaunch = "enqueue/npurt::launch";
inline constexpr const char* kEnqueueHostFunc = "enqueue/npuLaunchHostFunc";
inline constexpr const char* kEnqueueTask = "enqueue/npuLaunchTask(static)";
inline constexpr const char* kEnqueueBaseline = "enqueue/baseline(std::function)";
inline constexpr const char* kMemcpyD2D = "memcpy/npuMemcpy_D2D";
inline constexpr const char* kMemcpyH2D = "memcpy/npuMemcpy_H2D";
inline constexpr const char* kMemcpyD2H = "memcpy/npuMemcpy_D2H";
inline constexpr const char* kMemcpyAsyncD2D = "memcpy/npuMemcpyAsync_D2D+sync";
inline constexpr const char* kMemcpyStd = "memcpy/std::memcpy";
inline constexpr const char* kMemcpyStdSameBuffers = "memcpy/std::memcpy(D2D_buffers)";
inline constexpr const char* kGraphEager = "graph/eager_100_launches+sync";
inline constexpr const char* kGraphReplay = "graph/npuGraphLaunch_100_nodes+sync";
inline constexpr const char* kRaceCheck = "racecheck/100_declared_tasks+sync";

// Counter holding the producer-side cost of one enqueue (see enqueue_bench.cpp).
inline constexpr const char* kEnqueueCounter = "enq_ns_per_task";

void registerEnqueueBenchmarks();
void registerSyncBenchmarks();
void registerMemcpyBenchmarks();
void registerGraphBenchmarks();
void registerRaceCheckBenchmarks();
// Frees the buffers the memcpy benchmarks allocate on first use.
void releaseMemcpyBuffers();

}  // namespace npubench
