// Copy bandwidth of npuMemcpy (D2D, H2D, D2H), npuMemcpyAsync D2D followed by
// npuStreamSynchronize, and plain std::memcpy as the reference, for 4 KiB to
// 256 MiB in steps of 4x.
//
// The reference of the D2D target is std::memcpy between the very buffers
// the D2D copy uses (device memory is host memory here): on the development
// VM reading one 256 MiB buffer ran 10% slower than reading another in the
// same run, whoever copied, so a reference on other buffers measured where
// the pages happened to lie. std::memcpy between two host buffers is
// reported too.
//
// Every variant copies between the first `bytes` of the same kind of buffer:
// two 256 MiB device allocations on device 0 and two 256 MiB 64-byte aligned
// host allocations, all allocated once and written in full before any timing,
// so no variant pays first-touch page faults and small sizes are cache
// resident for all of them alike. Host memory is ordinary pageable memory, as
// a tensor's storage would be.
#include <cstdlib>
#include <cstring>

#include "bench_common.h"
#include "npurt/npurt.hpp"

namespace npubench {
namespace {

constexpr size_t kMaxBytes = size_t{256} << 20;

struct Buffers {
  void* deviceSrc = nullptr;
  void* deviceDst = nullptr;
  void* hostSrc = nullptr;
  void* hostDst = nullptr;
  npuStream_t stream = nullptr;  // for npuMemcpyAsync
  bool attempted = false;        // set up at most once, even if that failed
  bool ready = false;
};
Buffers gBuffers;

// Allocates and touches the buffers on first use. Returns false (with the run
// marked failed) if that fails.
bool buffers(benchmark::State& state) {
  Buffers& b = gBuffers;
  if (b.attempted) {
    if (!b.ready) state.SkipWithError("buffer setup failed earlier");
    return b.ready;
  }
  b.attempted = true;
  if (!ok(state, npuSetDevice(0)) || !ok(state, npuMalloc(&b.deviceSrc, kMaxBytes)) ||
      !ok(state, npuMalloc(&b.deviceDst, kMaxBytes)) ||
      !ok(state, npuMemset(b.deviceSrc, 0x5a, kMaxBytes)) ||
      !ok(state, npuMemset(b.deviceDst, 0, kMaxBytes))) {
    return false;
  }
  b.hostSrc = std::aligned_alloc(64, kMaxBytes);
  b.hostDst = std::aligned_alloc(64, kMaxBytes);
  if (b.hostSrc == nullptr || b.hostDst == nullptr) {
    state.SkipWithError("host allocation failed");
    return false;
  }
  std::memset(b.hostSrc, 0x5a, kMaxBytes);
  std::memset(b.hostDst, 0, kMaxBytes);
  b.ready = ok(state, npuStreamCreate(&b.stream));
  return b.ready;
}

template <npuMemcpyKind kKind>
void BM_NpuMemcpy(benchmark::State& state) {
  if (!buffers(state)) return;
  const size_t bytes = static_cast<size_t>(state.range(0));
  const Buffers& b = gBuffers;
  void* dst = kKind == npuMemcpyDeviceToHost ? b.hostDst : b.deviceDst;
  const void* src = kKind == npuMemcpyHostToDevice ? b.hostSrc : b.deviceSrc;
  for (auto _ : state) {
    if (!ok(state, npuMemcpy(dst, src, bytes, kKind))) break;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_NpuMemcpyAsyncD2D(benchmark::State& state) {
  if (!buffers(state)) return;
  const size_t bytes = static_cast<size_t>(state.range(0));
  const Buffers& b = gBuffers;
  for (auto _ : state) {
    if (!ok(state,
            npuMemcpyAsync(b.deviceDst, b.deviceSrc, bytes, npuMemcpyDeviceToDevice, b.stream)) ||
        !ok(state, npuStreamSynchronize(b.stream))) {
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

// Plain std::memcpy between two host buffers, or (kOnDeviceBuffers) between
// the very buffers npuMemcpy D2D copies between, which are host memory too.
template <bool kOnDeviceBuffers>
void BM_StdMemcpy(benchmark::State& state) {
  if (!buffers(state)) return;
  const size_t bytes = static_cast<size_t>(state.range(0));
  const Buffers& b = gBuffers;
  void* dst = kOnDeviceBuffers ? b.deviceDst : b.hostDst;
  const void* src = kOnDeviceBuffers ? b.deviceSrc : b.hostSrc;
  for (auto _ : state) {
    std::memcpy(dst, src, bytes);
    // The destination is never read: keep the copy from being optimised away.
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

}  // namespace

void registerMemcpyBenchmarks() {
  // One registration per size and variant, size-major: all variants of one
  // size run back to back, so a change in machine load (other builds on this
  // machine) skews the npu / std::memcpy ratio of a size as little as possible.
  for (int64_t bytes = 4 << 10; bytes <= static_cast<int64_t>(kMaxBytes); bytes *= 4) {
    const auto add = [bytes](const char* name, void (*fn)(benchmark::State&)) {
      // Real time: the async variant waits for an executor, and bandwidth
      // must be bytes per elapsed second for every variant alike.
      benchmark::RegisterBenchmark(name, fn)
          ->ArgName("bytes")
          ->Arg(bytes)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    };
    add(kMemcpyStd, &BM_StdMemcpy<false>);
    add(kMemcpyStdSameBuffers, &BM_StdMemcpy<true>);
    add(kMemcpyD2D, &BM_NpuMemcpy<npuMemcpyDeviceToDevice>);
    add(kMemcpyH2D, &BM_NpuMemcpy<npuMemcpyHostToDevice>);
    add(kMemcpyD2H, &BM_NpuMemcpy<npuMemcpyDeviceToHost>);
    add(kMemcpyAsyncD2D, &BM_NpuMemcpyAsyncD2D);
  }
}

void releaseMemcpyBuffers() {
  Buffers& b = gBuffers;
  if (b.stream != nullptr) (void)npuStreamDestroy(b.stream);
  (void)npuFree(b.deviceSrc);
  (void)npuFree(b.deviceDst);
  std::free(b.hostSrc);
  std::free(b.hostDst);
  b = Buffers{};
}

}  // namespace npubench
