// See NPUStream.h and Note [StreamId assignment].
#include "core/NPUStream.h"

#include <c10/util/CallOnce.h>
#include <c10/util/Logging.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUTrace.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu {
namespace {

constexpr int kMaxDevices = 32;  // npurt's upper bound for NPU_SIM_DEVICE_COUNT

// Runtime streams of one device. Created lazily, never destroyed: like
// torch_npu (and CUDA's pools) they live until process exit, so an NPUStream
// value never dangles.
// The pools are created under c10::call_once, which answers with one load
// once done: every launch and allocation looks a stream up, and libstdc++'s
// std::call_once goes through thread-locals at every call.
struct DeviceStreams {
  c10::once_flag baseOnce;  // default + secondary
  npuStream_t defaultStream = nullptr;
  npuStream_t secondaryStream = nullptr;

  c10::once_flag syncLaunchOnce;
  std::array<npuStream_t, kSyncLaunchStreamsPerDevice> syncLaunch{};
  std::atomic<uint32_t> syncLaunchCounter{0};

  c10::once_flag poolOnce;  // NORMAL + HIGH pools
  std::array<npuStream_t, kMaxStreamsPerPool> normal{};
  std::array<npuStream_t, kMaxStreamsPerPool> high{};
  std::atomic<uint32_t> normalCounter{0};
  std::atomic<uint32_t> highCounter{0};

  c10::once_flag bodyOnce;  // GRAPHBODY streams
  std::array<npuStream_t, kGraphBodyStreamsPerDevice> bodies{};
  std::mutex bodyMutex;   // guards bodyHeld and captureIndex
  uint32_t bodyHeld = 0;  // bit i: bodies[i] is acquired
  int captureIndex = -1;  // the default capture stream's body index, once chosen
};

std::array<DeviceStreams, kMaxDevices>& allDeviceStreams() {
  // Leaked on purpose: streams must outlive every static that may still
  // launch work during process exit. See Note [Shutdown order] in
  // csrc/npurt/README.md.
  static auto* streams = std::make_unique<std::array<DeviceStreams, kMaxDevices>>().release();
  return *streams;
}

// The calling thread's current stream id per device. Zero-initialised, and 0
// is the default stream's id, so a fresh thread starts on the default stream.
thread_local std::array<c10::StreamId, kMaxDevices> tlsCurrentStreams{};

npuStream_t createRuntimeStream(c10::DeviceIndex device, int priority) {
  npurt::DeviceGuard guard(device);
  npuStream_t s = nullptr;
  NPU_CHECK(npuStreamCreateWithPriority(&s, npuStreamNonBlocking, priority));
  return s;
}

// The stream-creation hooks of a pool fire after its call_once returned, on
// the thread that created it: a hook takes the GIL, and a thread that holds
// the GIL may be waiting in the same call_once (Note [Trace hooks]).
DeviceStreams& baseStreams(c10::DeviceIndex device) {
  DeviceStreams& d = allDeviceStreams()[device];
  bool created = false;
  c10::call_once(d.baseOnce, [&] {
    d.defaultStream = createRuntimeStream(device, 0);
    d.secondaryStream = createRuntimeStream(device, 0);
    created = true;
  });
  if (C10_UNLIKELY(created)) {
    trace::streamCreated(d.defaultStream);
    trace::streamCreated(d.secondaryStream);
  }
  return d;
}

// Creates every stream of `streams` once; the hooks fire after, as above.
template <size_t N>
void createAllOnce(c10::once_flag& once, std::array<npuStream_t, N>& streams,
                   c10::DeviceIndex device) {
  bool created = false;
  c10::call_once(once, [&] {
    for (auto& s : streams) s = createRuntimeStream(device, 0);
    created = true;
  });
  if (C10_UNLIKELY(created)) {
    for (npuStream_t s : streams) trace::streamCreated(s);
  }
}

DeviceStreams& syncLaunchStreams(c10::DeviceIndex device) {
  DeviceStreams& d = allDeviceStreams()[device];
  createAllOnce(d.syncLaunchOnce, d.syncLaunch, device);
  return d;
}

DeviceStreams& poolStreams(c10::DeviceIndex device) {
  DeviceStreams& d = allDeviceStreams()[device];
  bool created = false;
  c10::call_once(d.poolOnce, [&] {
    const int n = streamsPerPool();
    for (int i = 0; i < n; ++i) {
      d.normal[i] = createRuntimeStream(device, 0);
      d.high[i] = createRuntimeStream(device, -1);
    }
    created = true;
  });
  if (C10_UNLIKELY(created)) {
    for (int i = 0; i < streamsPerPool(); ++i) {
      trace::streamCreated(d.normal[i]);
      trace::streamCreated(d.high[i]);
    }
  }
  return d;
}

DeviceStreams& graphBodyStreams(c10::DeviceIndex device) {
  DeviceStreams& d = allDeviceStreams()[device];
  createAllOnce(d.bodyOnce, d.bodies, device);
  return d;
}

c10::StreamId makeId(StreamIdType kind, int index) {
  return (static_cast<c10::StreamId>(kind) << kStreamTypeBits) | index;
}

NPUStream makeStream(c10::DeviceIndex device, c10::StreamId id) {
  return NPUStream(
      NPUStream::UNCHECKED,
      c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id));
}

bool isExternalId(c10::StreamId id) { return (id & kExternalStreamMarker) != 0; }

}  // namespace

int streamsPerPool() {
  static const int n = [] {
    const char* v = std::getenv("STREAMS_PER_DEVICE");
    if (v == nullptr || v[0] == '\0') return kMaxStreamsPerPool;
    if (std::string(v) == "8") return 8;
    if (std::string(v) != "32") {
      TORCH_WARN("STREAMS_PER_DEVICE should be 8 or 32, got '", v, "'; using 32.");
    }
    return kMaxStreamsPerPool;
  }();
  return n;
}

std::ostream& operator<<(std::ostream& stream, StreamIdType s) {
  switch (s) {
    case StreamIdType::DEFAULT:
      return stream << "DEFAULT";
    case StreamIdType::SECONDARY:
      return stream << "SECONDARY";
    case StreamIdType::SYNCLAUNCH:
      return stream << "SYNCLAUNCH";
    case StreamIdType::NORMAL:
      return stream << "NORMAL";
    case StreamIdType::HIGH:
      return stream << "HIGH";
    case StreamIdType::EXT:
      return stream << "EXT";
    case StreamIdType::GRAPHBODY:
      return stream << "GRAPHBODY";
  }
  return stream << static_cast<int>(s);
}

c10::DeviceIndex checkedDeviceIndex(c10::DeviceIndex device) {
  if (device == -1) return current_device();
  const c10::DeviceIndex count = device_count_ensure_non_zero();
  TORCH_CHECK(device >= 0 && device < count, "Invalid device_index: ", static_cast<int>(device),
              ". Expected a device index in [0, ", static_cast<int>(count), ") or -1.",
              NPU_ERROR_SUFFIX);
  return device;
}

NPUStream::NPUStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream_.device_type() == c10::DeviceType::PrivateUse1,
              "Expected a npu stream, but got a stream of device type ", stream_.device_type(),
              NPU_ERROR_SUFFIX);
  // A c10::Stream can carry any id (torch.Stream(stream_id=...) does not
  // validate): validate it here, so a bad id is a user error at the API that
  // received it, never an internal assert later.
  (void)unpack3(stream_.id(), stream_.device_index(), stream_.device_type());
}

StreamIdType NPUStream::kind() const {
  if (isExternalId(id())) return StreamIdType::EXT;
  return static_cast<StreamIdType>(id() >> kStreamTypeBits);
}

npuStream_t NPUStream::rawHandle() const {
  const c10::DeviceIndex device = device_index();
  const int index = static_cast<int>(id() & ((1 << kStreamTypeBits) - 1));
  switch (kind()) {
    case StreamIdType::DEFAULT:
      return baseStreams(device).defaultStream;
    case StreamIdType::SECONDARY:
      return baseStreams(device).secondaryStream;
    case StreamIdType::SYNCLAUNCH:
      return syncLaunchStreams(device).syncLaunch[index];
    case StreamIdType::NORMAL:
      return poolStreams(device).normal[index];
    case StreamIdType::HIGH:
      return poolStreams(device).high[index];
    case StreamIdType::EXT:
      return external::lookup(device, id());
    case StreamIdType::GRAPHBODY:
      return graphBodyStreams(device).bodies[index];
  }
  TORCH_INTERNAL_ASSERT(false, "NPUStream with an unvalidated id ", id(),
                        "; construct streams through unpack3 or the pool functions");
}

npuStream_t NPUStream::stream() const {
  if (isExternal()) external::checkRawHandleAccess(*this);
  queue::drain(*this);
  return rawHandle();
}

bool NPUStream::query() const {
  if (isExternal()) external::checkManagedOnly(*this, "NPUStream::query");
  queue::drain(*this);
  const npuError_t status = npuStreamQuery(rawHandle());
  if (status == npuErrorNotReady) return false;
  NPU_CHECK(status);
  return true;
}

void NPUStream::synchronize() const {
  if (isExternal()) external::checkManagedOnly(*this, "NPUStream::synchronize");
  queue::drain(*this);
  NPU_CHECK(npuStreamSynchronize(rawHandle()));
  trace::streamSynchronized(*this);  // Note [Trace hooks]
}

int NPUStream::priority() const {
  int p = 0;
  NPU_CHECK(npuStreamGetPriority(rawHandle(), &p));
  return p;
}

NPUStream NPUStream::unpack3(c10::StreamId stream_id, c10::DeviceIndex device_index,
                             c10::DeviceType device_type) {
  TORCH_CHECK(device_type == c10::DeviceType::PrivateUse1,
              "Expected a npu stream, but got device_type ", static_cast<int>(device_type),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(device_index >= 0 && device_index < device_count_ensure_non_zero(),
              "Invalid device_index: ", static_cast<int>(device_index), NPU_ERROR_SUFFIX);
  if (stream_id >= 0 && isExternalId(stream_id)) {
    external::lookup(device_index, stream_id);  // raises "Unrecognized external NPU stream"
    return makeStream(device_index, stream_id);
  }
  TORCH_CHECK(stream_id >= 0 && stream_id < (7 << kStreamTypeBits), "Unrecognized stream ",
              stream_id, " (I didn't recognize the stream type or id)", NPU_ERROR_SUFFIX);
  const auto kind = static_cast<StreamIdType>(stream_id >> kStreamTypeBits);
  const int index = static_cast<int>(stream_id & ((1 << kStreamTypeBits) - 1));
  switch (kind) {
    case StreamIdType::DEFAULT:
    case StreamIdType::SECONDARY:
      TORCH_CHECK(index == 0, "Unrecognized stream ", stream_id,
                  " (the default and secondary streams have index 0)", NPU_ERROR_SUFFIX);
      break;
    case StreamIdType::SYNCLAUNCH:
      TORCH_CHECK(index < kSyncLaunchStreamsPerDevice, "Invalid sync launch stream index ", index,
                  " (pool size is ", kSyncLaunchStreamsPerDevice, ")", NPU_ERROR_SUFFIX);
      break;
    case StreamIdType::NORMAL:
    case StreamIdType::HIGH:
      TORCH_CHECK(index < streamsPerPool(), "Invalid stream index ", index, " (pool size is ",
                  streamsPerPool(), ")", NPU_ERROR_SUFFIX);
      break;
    case StreamIdType::EXT:
      TORCH_CHECK(false, "Unrecognized stream ", stream_id,
                  " (external streams carry the 1 << 30 marker)", NPU_ERROR_SUFFIX);
    case StreamIdType::GRAPHBODY:
      break;  // 32 of them: every index of the kind is valid
  }
  return makeStream(device_index, stream_id);
}

NPUStream getStreamFromPool(int priority, c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  DeviceStreams& d = poolStreams(device);
  // Round robin; relaxed is enough: the counter only spreads streams, it
  // orders nothing.
  const bool high = priority <= -1;
  auto& counter = high ? d.highCounter : d.normalCounter;
  const int index = static_cast<int>(counter.fetch_add(1, std::memory_order_relaxed) %
                                     static_cast<uint32_t>(streamsPerPool()));
  return makeStream(device, makeId(high ? StreamIdType::HIGH : StreamIdType::NORMAL, index));
}

NPUStream getStreamFromPool(bool isHighPriority, c10::DeviceIndex device) {
  return getStreamFromPool(isHighPriority ? -1 : 0, device);
}

// Marks a free GRAPHBODY stream of `d` held and returns its index. Call with
// d.bodyMutex held.
int holdFreeGraphBodyStream(DeviceStreams& d, c10::DeviceIndex device) {
  for (int i = 0; i < kGraphBodyStreamsPerDevice; ++i) {
    if ((d.bodyHeld & (1u << i)) != 0) continue;
    d.bodyHeld |= 1u << i;
    return i;
  }
  TORCH_CHECK(false, "All ", kGraphBodyStreamsPerDevice, " streams for the bodies of NPU graph ",
              "conditional nodes of device ", static_cast<int>(device),
              " are in use (one of them is torch.npu.graph's default capture stream): conditional "
              "nodes (torch.cond in a capture) nest, across the captures in progress, at most that "
              "deep.",
              NPU_ERROR_SUFFIX);
}

NPUStream acquireGraphBodyStream(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  DeviceStreams& d = graphBodyStreams(device);
  std::lock_guard<std::mutex> lock(d.bodyMutex);
  return makeStream(device, makeId(StreamIdType::GRAPHBODY, holdFreeGraphBodyStream(d, device)));
}

NPUStream getDefaultCaptureStream(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  DeviceStreams& d = graphBodyStreams(device);  // created outside the lock: the hooks take the GIL
  std::lock_guard<std::mutex> lock(d.bodyMutex);
  if (d.captureIndex < 0) d.captureIndex = holdFreeGraphBodyStream(d, device);  // held for good
  return makeStream(device, makeId(StreamIdType::GRAPHBODY, d.captureIndex));
}

void releaseGraphBodyStream(const NPUStream& stream) noexcept {
  if (stream.kind() != StreamIdType::GRAPHBODY) return;
  DeviceStreams& d = allDeviceStreams()[stream.device_index()];
  const auto bit = 1u << (stream.id() & ((1 << kStreamTypeBits) - 1));
  std::lock_guard<std::mutex> lock(d.bodyMutex);
  d.bodyHeld &= ~bit;
}

NPUStream getNPUStreamFromSyncLaunchPool(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  DeviceStreams& d = syncLaunchStreams(device);
  const int index = static_cast<int>(d.syncLaunchCounter.fetch_add(1, std::memory_order_relaxed) %
                                     kSyncLaunchStreamsPerDevice);
  return makeStream(device, makeId(StreamIdType::SYNCLAUNCH, index));
}

NPUStream getDefaultNPUStream(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  baseStreams(device);
  return makeStream(device, makeId(StreamIdType::DEFAULT, 0));
}

NPUStream getCurrentSecondaryStream(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  baseStreams(device);
  return makeStream(device, makeId(StreamIdType::SECONDARY, 0));
}

NPUStream getCurrentNPUStream(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  const c10::StreamId id = tlsCurrentStreams[device];
  if (id == 0) baseStreams(device);
  return makeStream(device, id);
}

void setCurrentNPUStream(NPUStream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "Expected a npu stream, but got ", stream.device_type(), NPU_ERROR_SUFFIX);
  const c10::DeviceIndex device = checkedDeviceIndex(stream.device_index());
  tlsCurrentStreams[device] = stream.id();
}

NPUStream getStreamFromExternal(npuStream_t ext_stream, c10::DeviceIndex device) {
  const auto [resolved_device, id] = external::registerStream(ext_stream, device);
  return makeStream(resolved_device, id);
}

std::ostream& operator<<(std::ostream& stream, const NPUStream& s) { return stream << s.unwrap(); }

}  // namespace c10_npu
