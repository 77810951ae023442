// c10_npu::NPUStream — PyTorch's view of a stream of the simulated NPU.
//
// Layer: framework core. May use c10/ATen and npurt; knows nothing of ops or
// Python.
//
// Model (mirrors torch_npu and c10/cuda/CUDAStream.h):
//  - Each device has a default stream, a secondary stream, a pool of 4
//    sync-launch streams, and two pools (NORMAL and HIGH priority) of 32
//    streams each (8 with STREAMS_PER_DEVICE=8), handed out round robin. All
//    of them are created lazily, on the first use of the device or the pool,
//    and live until process exit.
//  - External streams are streams that another library created through npurt;
//    they are registered per device the first time they are wrapped.
//  - The current stream is per host thread and per device; it starts as the
//    device's default stream.
//
// An NPUStream is a value (a c10::Stream: device + StreamId); copying it is
// cheap and it never owns the underlying runtime stream.
//
// Note [StreamId assignment]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Managed streams: StreamId = (kind << 5) | index, kind a StreamIdType:
//   DEFAULT    = 0  → id 0
//   SECONDARY  = 1  → id 32
//   SYNCLAUNCH = 2  → ids 64..67        (4 per device)
//   NORMAL     = 3  → ids 96..96+N-1    (N = pool size, 32 or 8)
//   HIGH       = 4  → ids 128..128+N-1
//   GRAPHBODY  = 6  → ids 192..223      (32 per device, private: below)
// External streams: StreamId = (1 << 30) | registry index on that device
// (kind EXT = 5 is reported for them). Any other value is not a stream id and
// is rejected by NPUStream::unpack3 with torch_npu's messages.
//
// GRAPHBODY streams capture the bodies of NPU graph conditional nodes (Note
// [Conditional nodes in NPU graphs]). The pools hand a stream to anyone, so a
// body captured on a pool stream would record whatever another thread queued
// on that stream meanwhile; a body stream is instead acquired by one capture
// and released when its body ends (CUDA creates a fresh stream per body).
// One of them is held for good per device as torch.npu.graph's default capture
// stream: torch.cuda.graph takes its capture stream from the pool, so a user's
// torch.cuda.Stream() can be that very stream, and a fork to it forks nothing
// (the capture then misses an unjoined fork, and a "side" stream serialises
// with the capture). No pool call returns a GRAPHBODY stream.
#pragma once

#include <c10/core/Stream.h>
#include <c10/core/impl/GPUTrace.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <ostream>
#include <tuple>

#include "npurt/npurt.h"

namespace c10_npu {

// Stream kinds. See Note [StreamId assignment].
enum class StreamIdType : uint8_t {
  DEFAULT = 0,
  SECONDARY = 1,
  SYNCLAUNCH = 2,
  NORMAL = 3,
  HIGH = 4,
  EXT = 5,
  GRAPHBODY = 6,
};

std::ostream& operator<<(std::ostream& stream, StreamIdType s);

constexpr int kStreamTypeBits = 5;
constexpr int64_t kExternalStreamMarker = int64_t{1} << 30;
constexpr int kSyncLaunchStreamsPerDevice = 4;
constexpr int kMaxStreamsPerPool = 32;
constexpr int kGraphBodyStreamsPerDevice = 32;

// Pool size per priority: 32, or 8 when STREAMS_PER_DEVICE=8 (any other value
// warns once and falls back to 32). Thread-safe; read once.
int streamsPerPool();

class NPUStream {
 public:
  enum Unchecked { UNCHECKED };

  // Wraps a c10::Stream, validating it like unpack3 (device type npu, a valid
  // device index, an id that names a stream).
  explicit NPUStream(c10::Stream stream);
  // Wraps without checking; for callers that already know.
  explicit NPUStream(Unchecked, c10::Stream stream) : stream_(stream) {}

  bool operator==(const NPUStream& other) const noexcept { return stream_ == other.stream_; }
  bool operator!=(const NPUStream& other) const noexcept { return !(*this == other); }

  operator c10::Stream() const { return unwrap(); }

  c10::DeviceType device_type() const { return stream_.device_type(); }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::Device device() const { return stream_.device(); }
  c10::StreamId id() const { return stream_.id(); }
  c10::Stream unwrap() const { return stream_; }
  StreamIdType kind() const;

  bool isExternal() const { return kind() == StreamIdType::EXT; }
  bool isSyncLaunchStream() const { return kind() == StreamIdType::SYNCLAUNCH; }

  // The runtime handle of this stream. Drains the task queue first, so that
  // work queued through PyTorch has reached the runtime before another library
  // uses the handle (see Note [Task queue drain rule] in TaskQueue.h). For an
  // external stream under PER_STREAM_QUEUE=1 in compat mode this raises, as
  // torch_npu does. Thread-safe.
  npuStream_t stream() const;

  // The runtime handle without draining; for the task queue and the
  // allocator. Raises if the stream is an external stream that was destroyed.
  // Thread-safe.
  npuStream_t rawHandle() const;

  // True if all work queued on the stream (task queue included) finished.
  // Raises for external streams in compat mode. Thread-safe.
  bool query() const;

  // Blocks until all work queued on the stream finished; raises a failure of
  // a task on the stream. Raises for external streams in compat mode.
  // Releases nothing: callers from Python release the GIL. Thread-safe.
  void synchronize() const;

  // Runtime priority of the stream (0 normal, -1 high). Thread-safe.
  int priority() const;

  // Range of priorities accepted by getStreamFromPool: (least, greatest).
  static std::tuple<int, int> priority_range() { return std::make_tuple(0, -1); }

  // Serialisation to and from three integers (used by Python). unpack3
  // validates everything and raises torch_npu's messages for ids that are not
  // streams. Thread-safe.
  c10::StreamData3 pack3() const { return stream_.pack3(); }
  static NPUStream unpack3(c10::StreamId stream_id, c10::DeviceIndex device_index,
                           c10::DeviceType device_type);

 private:
  c10::Stream stream_;
};

// A stream from the pool of the given priority, round robin. Priority <= -1
// gives the HIGH pool, anything else NORMAL (torch_npu's rule). device -1 =
// current device. Thread-safe.
NPUStream getStreamFromPool(int priority, c10::DeviceIndex device = -1);
NPUStream getStreamFromPool(bool isHighPriority = false, c10::DeviceIndex device = -1);

// A stream from the sync-launch pool (launches on it bypass the task queue).
// A GRAPHBODY stream of `device` no one else holds, until releaseGraphBodyStream
// (Note [StreamId assignment]); raises when all 32 are held. Thread-safe.
NPUStream acquireGraphBodyStream(c10::DeviceIndex device);
// Gives back a stream acquireGraphBodyStream returned. Thread-safe.
void releaseGraphBodyStream(const NPUStream& stream) noexcept;
// The stream torch.npu.graph captures on when it is given none: a GRAPHBODY
// stream of `device` held for the life of the process, so no pool call hands
// it out (Note [StreamId assignment]). The same stream at every call.
// Thread-safe.
NPUStream getDefaultCaptureStream(c10::DeviceIndex device = -1);

NPUStream getNPUStreamFromSyncLaunchPool(c10::DeviceIndex device = -1);

// The default (id 0) and secondary (id 32) streams of a device.
NPUStream getDefaultNPUStream(c10::DeviceIndex device = -1);
NPUStream getCurrentSecondaryStream(c10::DeviceIndex device = -1);

// The calling thread's current stream for a device (-1 = current device).
// Thread-local; thread-safe.
NPUStream getCurrentNPUStream(c10::DeviceIndex device = -1);

// Makes `stream` the calling thread's current stream for *its* device; does
// not change the current device (prefer c10::StreamGuard, which does).
void setCurrentNPUStream(NPUStream stream);

// Wraps a runtime stream created by another library. The same handle on the
// same device always gives the same id. nullptr, garbage and destroyed
// handles raise; device -1 takes the device the handle belongs to, another
// device than the handle's raises. Thread-safe.
NPUStream getStreamFromExternal(npuStream_t ext_stream, c10::DeviceIndex device = -1);

// Validates a device index: -1 → current device; out of range raises
// "Invalid device_index: N". Thread-safe.
c10::DeviceIndex checkedDeviceIndex(c10::DeviceIndex device);

std::ostream& operator<<(std::ostream& stream, const NPUStream& s);

}  // namespace c10_npu

namespace std {
template <>
struct hash<c10_npu::NPUStream> {
  size_t operator()(c10_npu::NPUStream s) const noexcept {
    return std::hash<c10::Stream>{}(s.unwrap());
  }
};
}  // namespace std
