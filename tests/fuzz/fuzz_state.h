// State of one npurt_fuzz input: the bytes being interpreted, and the
// handles and memory the calls so far created (live, destroyed or freed), so
// that later calls can be given valid, stale or garbage arguments.
//
// Host memory handed to npurt is always valid for the length given (a
// static scratch buffer): a garbage *host* pointer would crash in memcpy by
// contract, not because of a bug. Device pointers, handles and sizes may be
// anything; npurt must reject what is invalid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "npurt/npurt.h"

namespace npurt_fuzz {

// Reads the input front to back; past the end every read gives 0.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
  // A value in [0, n) (n > 0).
  size_t below(size_t n) { return n == 0 ? 0 : u16() % n; }
  bool flip() { return (u8() & 1) != 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Host memory that npurt may read and write: static, so asynchronous copies
// queued by one input may still run during the next one.
inline constexpr size_t kScratchSize = 1 << 16;
inline constexpr size_t kHostMax = kScratchSize / 2;  // longest host range
alignas(64) inline unsigned char gScratch[kScratchSize];
// Registered with npuHostRegister by the fuzzer (page-aligned pieces).
alignas(4096) inline unsigned char gRegisterable[4 * 4096];

struct DeviceBlock {
  void* ptr;
  size_t size;
  bool live;
};

class State {
 public:
  explicit State(Input& in) : in_(in) {}

  std::vector<npuStream_t> streams;      // live
  std::vector<npuStream_t> deadStreams;  // destroyed
  std::vector<npuEvent_t> events;        // live
  std::vector<npuEvent_t> deadEvents;    // destroyed
  std::vector<npuEvent_t> recorded;      // live events recorded at least once
  std::vector<DeviceBlock> blocks;       // npuMalloc results, live or freed
  std::vector<void*> pinned;             // npuMallocHost results
  std::vector<void*> registered;         // npuHostRegister successes
  std::vector<uint64_t> callbacks;       // stream-destroy callback handles

  // Records that the block based at `p` was freed (its memory may be
  // reused, and must not be passed where host memory is expected).
  void markFreed(void* p) {
    for (DeviceBlock& b : blocks) {
      if (b.ptr == p) b.live = false;
    }
  }

  // A stream handle: usually live, sometimes destroyed, NULL or garbage.
  npuStream_t stream() {
    switch (in_.below(8)) {
      case 0:
        return nullptr;
      case 1:
        return reinterpret_cast<npuStream_t>(static_cast<uintptr_t>(in_.u64()));
      case 2:
        if (!deadStreams.empty()) return deadStreams[in_.below(deadStreams.size())];
        [[fallthrough]];
      default:
        if (!streams.empty()) return streams[in_.below(streams.size())];
        return nullptr;
    }
  }

  npuEvent_t event() {
    switch (in_.below(8)) {
      case 0:
        return nullptr;
      case 1:
        return reinterpret_cast<npuEvent_t>(static_cast<uintptr_t>(in_.u64()));
      case 2:
        if (!deadEvents.empty()) return deadEvents[in_.below(deadEvents.size())];
        [[fallthrough]];
      default:
        if (!events.empty()) return events[in_.below(events.size())];
        return nullptr;
    }
  }

  // A live, recorded event (safe to synchronize on), or NULL.
  npuEvent_t recordedEvent() {
    return recorded.empty() ? nullptr : recorded[in_.below(recorded.size())];
  }

  // Any pointer as a *device* argument: inside a live block (maybe
  // overrunning), a freed block, scratch (host memory), NULL or garbage.
  void* devicePointer() {
    switch (in_.below(8)) {
      case 0:
        return nullptr;
      case 1:
        return reinterpret_cast<void*>(static_cast<uintptr_t>(in_.u64()));
      case 2:
        return gScratch + in_.below(kScratchSize);
      default:
        if (blocks.empty()) return nullptr;
        const DeviceBlock& b = blocks[in_.below(blocks.size())];
        return static_cast<char*>(b.ptr) + (in_.flip() ? 0 : in_.below(b.size + 64));
    }
  }

  // A pointer inside a live block, or valid host scratch for `count` bytes:
  // what npuMemcpyDefault may be given (it treats unknown memory as host).
  void* inferablePointer(size_t count, int half) {
    if (in_.flip()) {
      for (size_t tries = 0; tries < 2 && !blocks.empty(); ++tries) {
        const DeviceBlock& b = blocks[in_.below(blocks.size())];
        if (b.live) return static_cast<char*>(b.ptr) + in_.below(b.size);
      }
    }
    return hostPointer(count, half);
  }

  // Host scratch valid for `count` bytes (count <= kHostMax), in one half
  // of the scratch: 0 for sources, 1 for destinations, so that a host-to-host
  // copy never overlaps (that would be the caller's bug, as with memcpy).
  void* hostPointer(size_t count, int half) {
    return gScratch + half * kHostMax + in_.below(kHostMax - count + 1);
  }

  // A byte count: mostly small, sometimes 0 or huge.
  size_t count() {
    switch (in_.below(16)) {
      case 0:
        return 0;
      case 1:
        return static_cast<size_t>(in_.u64());
      default:
        return 1 + in_.below(4096);
    }
  }

 private:
  Input& in_;
};

}  // namespace npurt_fuzz
