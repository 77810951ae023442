// libFuzzer target for the npurt C API (see tests/fuzz/README.md).
//
// Each input is a program: every step reads an opcode byte and then the
// arguments it needs, and calls one npurt function with handles that are
// live, destroyed, NULL or garbage, device pointers inside, across the end
// of, or outside live allocations, and arbitrary sizes, flags and enum
// values. npurt must answer every call with a status, never crash, hang or
// leak; ASan and UBSan watch the memory. Nothing blocks forever: tasks are
// short, synchronizes use short timeouts, and an event is synchronized only
// after it was recorded (a recorded version always completes, since streams
// cannot wait on a version recorded after the wait).
//
// At the end of each input everything the input created is destroyed or
// freed, the knobs are reset and every device is drained, so that inputs do
// not accumulate state.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fuzz_state.h"
#include "npurt/npurt.h"
#include "npurt/npurt_stream_idle.h"

namespace npurt_fuzz {
namespace {

std::atomic<uint64_t> gHostFnRuns{0};
std::atomic<uint64_t> gReleases{0};

void hostFn(void* user) {
  gHostFnRuns++;
  if (user != nullptr) *static_cast<unsigned char*>(user) += 1;
}

int taskRun(void* user, char* errorBuf, size_t errorBufSize) {
  const auto mode = static_cast<unsigned>(reinterpret_cast<uintptr_t>(user) & 3u);
  if (mode == 1) {
    std::snprintf(errorBuf, errorBufSize, "fuzzed failure");
    return 1;
  }
  if (mode == 2) {
    // A message that fills the buffer without a NUL.
    for (size_t i = 0; i < errorBufSize; ++i) errorBuf[i] = 'x';
    return -1;
  }
  return 0;
}

void taskRelease(void*) { gReleases++; }

void destroyCallback(npuStream_t, int, void*) {}

// A callback that enqueues on the stream being destroyed (allowed: the
// stream still accepts work during the call).
void enqueueingDestroyCallback(npuStream_t stream, int, void*) {
  (void)npuLaunchHostFunc(stream, &hostFn, nullptr);
}

const char* const kNames[] = {"fuzz_a", "fuzz_b", "", nullptr};

// Kinds 0..4 are valid, 5..7 must be rejected (other ints are not
// representable in npuMemcpyKind: passing one from C++ is undefined).
npuMemcpyKind memcpyKind(Input& in) {
  const int raw = static_cast<int>(in.below(8));
  npuMemcpyKind kind;
  std::memcpy(&kind, &raw, sizeof kind);
  return kind;
}

// Source and destination pointers that are valid where `kind` says host.
void copyArguments(State& st, Input& in, int rawKind, size_t& count, void*& dst, const void*& src) {
  const bool dstHost = rawKind == npuMemcpyHostToHost || rawKind == npuMemcpyDeviceToHost;
  const bool srcHost = rawKind == npuMemcpyHostToHost || rawKind == npuMemcpyHostToDevice;
  const bool inferred = rawKind == npuMemcpyDefault;
  const bool validKind = rawKind >= 0 && rawKind <= npuMemcpyDefault;
  if (validKind && (dstHost || srcHost || inferred) && count > kHostMax) count %= kHostMax + 1;
  if (inferred) {
    dst = st.inferablePointer(count, 1);
    src = st.inferablePointer(count, 0);
    return;
  }
  dst = dstHost ? st.hostPointer(count, 1) : st.devicePointer();
  src = srcHost ? st.hostPointer(count, 0) : st.devicePointer();
  if (!validKind) return;  // rejected before any pointer is looked at
}

void step(State& st, Input& in) {
  switch (in.below(40)) {
    case 0: {
      npuStream_t s = nullptr;
      const unsigned flags = in.flip() ? in.u8() : (in.u8() & 1u);
      const int priority = static_cast<int8_t>(in.u8());
      if (npuStreamCreateWithPriority(in.flip() ? &s : nullptr, flags, priority) == npuSuccess &&
          s != nullptr) {
        st.streams.push_back(s);
      }
      break;
    }
    case 1: {
      if (st.streams.empty() || in.flip()) {
        (void)npuStreamDestroy(st.stream());
        break;
      }
      const size_t i = in.below(st.streams.size());
      if (npuStreamDestroy(st.streams[i]) == npuSuccess) {
        st.deadStreams.push_back(st.streams[i]);
        st.streams.erase(st.streams.begin() + static_cast<std::ptrdiff_t>(i));
      }
      break;
    }
    case 2:
      (void)npuStreamQuery(st.stream());
      break;
    case 3: {
      const int64_t timeout = in.flip() ? static_cast<int64_t>(in.below(2000)) : -1 - in.u8();
      (void)npuStreamSynchronizeWithTimeout(st.stream(), timeout);
      break;
    }
    case 4:
      (void)npuStreamWaitEvent(st.stream(), st.event(), in.flip() ? 0u : in.u8());
      break;
    case 5: {
      npuEvent_t e = nullptr;
      const unsigned flags = in.flip() ? in.u8() : (in.u8() & 3u);
      if (npuEventCreateWithFlags(in.flip() ? &e : nullptr, flags) == npuSuccess && e != nullptr) {
        st.events.push_back(e);
      }
      break;
    }
    case 6: {
      if (st.events.empty() || st.streams.empty() || in.flip()) {
        (void)npuEventRecord(st.event(), st.stream());
        break;
      }
      npuEvent_t e = st.events[in.below(st.events.size())];
      if (npuEventRecord(e, st.stream()) == npuSuccess) st.recorded.push_back(e);
      break;
    }
    case 7:
      (void)npuEventQuery(st.event());
      break;
    case 8:
      if (npuEvent_t e = st.recordedEvent(); e != nullptr) (void)npuEventSynchronize(e);
      break;
    case 9: {
      float ms = 0;
      uint64_t ns = 0;
      int device = 0;
      (void)npuEventElapsedTime(in.flip() ? &ms : nullptr, st.event(), st.event());
      (void)npuEventGetTimestamp(st.event(), in.flip() ? &ns : nullptr);
      (void)npuEventGetDevice(st.event(), in.flip() ? &device : nullptr);
      break;
    }
    case 10: {
      if (st.events.empty() || in.flip()) {
        (void)npuEventDestroy(st.event());
        break;
      }
      const size_t i = in.below(st.events.size());
      npuEvent_t e = st.events[i];
      if (npuEventDestroy(e) == npuSuccess) {
        st.deadEvents.push_back(e);
        st.events.erase(st.events.begin() + static_cast<std::ptrdiff_t>(i));
        std::erase(st.recorded, e);
      }
      break;
    }
    case 11: {
      void* p = nullptr;
      const size_t size = in.below(8) == 0 ? st.count() : in.below(1 << 16);
      if (npuMalloc(in.flip() ? &p : nullptr, size) == npuSuccess && p != nullptr) {
        st.blocks.push_back({p, size, true});
      }
      break;
    }
    case 12: {
      if (!st.blocks.empty() && in.flip()) {
        DeviceBlock& b = st.blocks[in.below(st.blocks.size())];
        if (npuFree(b.ptr) == npuSuccess) st.markFreed(b.ptr);  // a second free is rejected
      } else if (void* p = st.devicePointer(); npuFree(p) == npuSuccess && p != nullptr) {
        st.markFreed(p);  // a live block's base, picked at random
      }
      break;
    }
    case 13:
    case 14: {
      const npuMemcpyKind kind = memcpyKind(in);
      int rawKind = 0;
      std::memcpy(&rawKind, &kind, sizeof rawKind);
      size_t count = st.count();
      void* dst = nullptr;
      const void* src = nullptr;
      copyArguments(st, in, rawKind, count, dst, src);
      if (in.flip()) {
        (void)npuMemcpy(dst, src, count, kind);
      } else {
        (void)npuMemcpyAsync(dst, src, count, kind, st.stream());
      }
      break;
    }
    case 15: {
      const int value = static_cast<int>(in.u32());
      if (in.flip()) {
        (void)npuMemset(st.devicePointer(), value, st.count());
      } else {
        (void)npuMemsetAsync(st.devicePointer(), value, st.count(), st.stream());
      }
      break;
    }
    case 16: {
      void* p = nullptr;
      if (npuMallocHost(in.flip() ? &p : nullptr, in.below(8192)) == npuSuccess && p != nullptr) {
        st.pinned.push_back(p);
      }
      break;
    }
    case 17: {
      if (!st.pinned.empty() && in.flip()) {
        const size_t i = in.below(st.pinned.size());
        if (npuFreeHost(st.pinned[i]) == npuSuccess) {
          st.pinned.erase(st.pinned.begin() + static_cast<std::ptrdiff_t>(i));
        }
      } else {
        (void)npuFreeHost(st.devicePointer());
      }
      break;
    }
    case 18: {
      void* p = in.flip() ? static_cast<void*>(gRegisterable + in.below(sizeof gRegisterable))
                          : st.devicePointer();
      const size_t size = in.flip() ? in.below(sizeof gRegisterable) : st.count();
      if (npuHostRegister(p, size, in.below(4) == 0 ? in.u8() : 0u) == npuSuccess) {
        st.registered.push_back(p);
      }
      break;
    }
    case 19:
      (void)npuHostUnregister(in.flip() ? static_cast<void*>(gRegisterable + 4096 * in.below(4))
                                        : st.devicePointer());
      break;
    case 20: {
      npuPointerAttributes attributes;
      (void)npuPointerGetAttributes(in.flip() ? &attributes : nullptr, st.devicePointer());
      break;
    }
    case 21:
    case 22: {
      void* user = in.flip() ? static_cast<void*>(st.hostPointer(1, 1)) : nullptr;
      (void)npuLaunchHostFunc(st.stream(), in.below(8) == 0 ? nullptr : &hostFn, user);
      break;
    }
    case 23:
    case 24: {
      npuTask task{kNames[in.below(4)], in.below(8) == 0 ? nullptr : &taskRun,
                   in.flip() ? &taskRelease : nullptr,
                   reinterpret_cast<void*>(static_cast<uintptr_t>(in.below(4))),
                   in.below(8) == 0 ? in.u8() : (in.u8() & npuTaskCopyName)};
      (void)npuLaunchTask(st.stream(), in.below(16) == 0 ? nullptr : &task);
      break;
    }
    case 25:
      (void)npuDeviceSynchronize();
      break;
    case 26:
      (void)npuSetDevice(in.below(8) == 0 ? static_cast<int>(in.u32()) : in.flip());
      break;
    case 27: {
      int i = 0;
      size_t a = 0, b = 0;
      npuDeviceProp prop;
      (void)npuGetDevice(in.flip() ? &i : nullptr);
      (void)npuGetDeviceCount(in.flip() ? &i : nullptr);
      (void)npuGetDeviceProperties(in.flip() ? &prop : nullptr, static_cast<int8_t>(in.u8()));
      (void)npuMemGetInfo(in.flip() ? &a : nullptr, in.flip() ? &b : nullptr);
      (void)npuDeviceGetStreamPriorityRange(in.flip() ? &i : nullptr, in.flip() ? &i : nullptr);
      break;
    }
    case 28:
      // Valid delays stay short (a fuzzed 10 s delay would only make it slow).
      (void)npuSetTaskDelay(in.below(8) == 0 ? 10'000'001u + in.u16() : in.below(50));
      break;
    case 29:
      (void)npuStreamSetTaskDelay(st.stream(), in.below(8) == 0
                                                   ? 10'000'001 + static_cast<int64_t>(in.u32())
                                                   : static_cast<int64_t>(in.below(50)) - 1);
      break;
    case 30: {
      uint64_t handle = 0;
      const npuStreamDestroyCallback_t callbacks[] = {&destroyCallback, &enqueueingDestroyCallback,
                                                      nullptr};
      if (npuRegisterStreamDestroyCallback(callbacks[in.below(3)], nullptr,
                                           in.flip() ? &handle : nullptr) == npuSuccess) {
        st.callbacks.push_back(handle);
      }
      break;
    }
    case 31:
      (void)npuUnregisterStreamDestroyCallback(st.callbacks.empty() || in.flip()
                                                   ? in.u64()
                                                   : st.callbacks[in.below(st.callbacks.size())]);
      break;
    case 32: {
      // Every representable npuFaultKind is valid (see memcpyKind).
      (void)npuSetFaultInjection(static_cast<npuFaultKind>(in.below(4)), in.below(6));
      break;
    }
    case 33: {
      (void)npuStreamPeekAtLastError(st.stream());
      int idle = 0;
      (void)npuStreamIsIdle(st.stream(), &idle);
      break;
    }
    case 34: {
      int i = 0;
      unsigned u = 0;
      uint64_t id = 0;
      npuStream_t s = st.stream();
      (void)npuStreamGetDevice(s, in.flip() ? &i : nullptr);
      (void)npuStreamGetPriority(s, in.flip() ? &i : nullptr);
      (void)npuStreamGetFlags(s, in.flip() ? &u : nullptr);
      (void)npuStreamGetId(s, in.flip() ? &id : nullptr);
      break;
    }
    case 35: {
      int state = 0;
      (void)npuGetForkState(in.flip() ? &state : nullptr);
      (void)npuGetErrorName(static_cast<npuError_t>(in.below(20)));
      (void)npuGetLastErrorMessage();
      break;
    }
    case 36:
      (void)(in.flip() ? npuTraceStart() : npuTraceStop());
      break;
    case 37:
      (void)npuTraceWrite(in.flip() ? "/dev/null" : nullptr);
      break;
    case 38:
      // Blocking: every queued task is short and finite.
      (void)npuStreamSynchronize(st.stream());
      break;
    default:
      (void)npuEventSynchronize(st.event());  // never-recorded ones return at once
      break;
  }
}

// Leaves the process as the input found it (see the file comment).
void cleanUp(State& st) {
  for (int kind = npuFaultLaunch; kind <= npuFaultAlloc; ++kind) {
    (void)npuSetFaultInjection(static_cast<npuFaultKind>(kind), 0);
  }
  (void)npuSetTaskDelay(0);
  (void)npuTraceStop();
  for (uint64_t handle : st.callbacks) (void)npuUnregisterStreamDestroyCallback(handle);
  for (npuStream_t s : st.streams) (void)npuStreamDestroy(s);
  for (npuEvent_t e : st.events) (void)npuEventDestroy(e);
  int count = 0;
  if (npuGetDeviceCount(&count) == npuSuccess) {
    for (int d = 0; d < count; ++d) {
      (void)npuSetDevice(d);
      // Twice: the first may report a held failure.
      (void)npuDeviceSynchronize();
      (void)npuDeviceSynchronize();
    }
  }
  (void)npuSetDevice(0);
  for (const DeviceBlock& b : st.blocks) {
    if (b.live) (void)npuFree(b.ptr);
  }
  for (void* p : st.pinned) (void)npuFreeHost(p);
  for (void* p : st.registered) (void)npuHostUnregister(p);  // some may be gone already
}

}  // namespace
}  // namespace npurt_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  npurt_fuzz::Input in(data, size);
  npurt_fuzz::State st(in);
  for (int steps = 0; steps < 256 && !in.done(); ++steps) npurt_fuzz::step(st, in);
  npurt_fuzz::cleanUp(st);
  return 0;
}
