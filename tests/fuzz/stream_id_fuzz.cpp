// libFuzzer target for stream-id unpacking in the framework core (see
// tests/fuzz/README.md): c10_npu::NPUStream::unpack3, the validating
// NPUStream(c10::Stream) constructor and getStreamFromExternal.
//
// Every step of an input reads an opcode byte and its arguments and calls one
// of them with an arbitrary (or structured, to reach the deeper branches
// quickly) 64-bit stream id, device index and device type, or a garbage /
// live / destroyed runtime stream handle. Contract: a triple that does not
// name a stream raises c10::Error, never crashes or aborts; anything else
// escaping is a finding (libFuzzer reports the uncaught exception).
//
// When a triple is accepted, the stream must be the one it names: the triple
// round-trips through pack3 unchanged, its kind is a StreamIdType, and the
// id is the canonical id of that stream (for an external stream, the id
// getStreamFromExternal gives for its handle) — so two different ids never
// denote the same stream.
//
// Linked against libnpu_core (built here with clang, coverage, ASan and
// UBSan) and c10/torch_cpu from the wheel (gcc, uninstrumented; the C++ ABI
// is the same: both use the system libstdc++ with its default
// _GLIBCXX_USE_CXX11_ABI=1, which torch.compiled_with_cxx11_abi() confirms for
// the wheel; TORCH_CXX_FLAGS is empty for torch 2.13).
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/NPUStream.h"
#include "npurt/npurt.h"

namespace {

using c10_npu::NPUStream;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Runtime streams created by inputs and wrapped as external streams. Kept
// across inputs (the registry never forgets an id, by design), bounded.
constexpr size_t kMaxLive = 4;
constexpr size_t kMaxCreated = 2000;  // registry entries per run stay small
std::vector<npuStream_t> gLive;
std::vector<npuStream_t> gDead;
size_t gCreated = 0;

// The triple being checked, for the report.
int64_t gId = 0;
int gDevice = 0;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "stream_id_fuzz: invariant violated: %s (stream_id %lld = 0x%llx, device %d)\n",
               what, static_cast<long long>(gId), static_cast<unsigned long long>(gId), gDevice);
  std::abort();
}

c10::DeviceType deviceType(uint8_t raw) {
  // Mostly PrivateUse1, else any int8 value (c10::DeviceType is an int8_t
  // enum, so every byte is a representable value).
  if (raw < 160) return c10::DeviceType::PrivateUse1;
  c10::DeviceType t;
  const int8_t v = static_cast<int8_t>(raw);
  std::memcpy(&t, &v, sizeof t);
  return t;
}

c10::DeviceIndex deviceIndex(uint8_t raw) {
  if (raw < 200) return static_cast<c10::DeviceIndex>(raw % 4);  // 0, 1 valid; 2, 3 not
  return static_cast<c10::DeviceIndex>(static_cast<int8_t>(raw));
}

// An id built from fields, so that kinds, indexes at the pool limits, the
// external marker and stray high bits all come up quickly.
int64_t structuredId(Reader& in) {
  const uint8_t kind = in.u8() & 7;
  const uint8_t index = in.u8();
  const uint8_t shape = in.u8();
  int64_t id = (static_cast<int64_t>(kind) << c10_npu::kStreamTypeBits) | (index & 31);
  switch (shape & 7) {
    case 0: break;
    case 1: id = c10_npu::kExternalStreamMarker | (index & 7); break;
    case 2: id = c10_npu::kExternalStreamMarker | static_cast<int64_t>(in.u64() & 0x3fffffff); break;
    case 3: id |= static_cast<int64_t>(in.u8() & 63) << 31; break;  // stray high bits
    case 4:
      id = c10_npu::kExternalStreamMarker | (index & 7) |
           (static_cast<int64_t>(in.u8() & 63) << 31);
      break;
    case 5: id = -id - 1; break;
    case 6: id = (static_cast<int64_t>(kind) << c10_npu::kStreamTypeBits) | index; break;
    default: id = static_cast<int64_t>(in.u64()); break;
  }
  return id;
}

// The checks on a triple that unpack3 accepted.
void checkAccepted(const NPUStream& s, int64_t id, c10::DeviceIndex device) {
  if (s.id() != id || s.device_index() != device ||
      s.device_type() != c10::DeviceType::PrivateUse1) {
    fail("unpack3 returned a different triple");
  }
  const auto kind = static_cast<int>(s.kind());
  if (kind < 0 || kind > static_cast<int>(c10_npu::StreamIdType::GRAPHBODY))
    fail("kind out of range");
  const auto d = s.pack3();
  if (d.stream_id != id || d.device_index != device) fail("pack3 does not round-trip");
  npuStream_t raw = nullptr;
  try {
    raw = s.rawHandle();
  } catch (const c10::Error&) {
    return;  // an external stream destroyed in between: an error is fine
  }
  if (s.isExternal()) {
    // The canonical id of the stream behind the handle must be this id.
    NPUStream canonical = c10_npu::getStreamFromExternal(raw, device);
    if (canonical.id() != id) fail("two ids accepted for one external stream");
  } else {
    if (id < 0 || id >= (7 << c10_npu::kStreamTypeBits)) fail("managed id out of range");
  }
  // Validating construction from the c10::Stream agrees.
  NPUStream again(s.unwrap());
  if (again != s) fail("NPUStream(c10::Stream) disagrees with unpack3");
}

void unpack(int64_t id, c10::DeviceIndex device, c10::DeviceType type) {
  gId = id;
  gDevice = device;
  try {
    const NPUStream s = NPUStream::unpack3(id, device, type);
    if (type != c10::DeviceType::PrivateUse1) fail("non-npu device type accepted");
    checkAccepted(s, id, device);
  } catch (const c10::Error&) {
  }
  // The validating constructor must raise (or accept) exactly like unpack3.
  try {
    NPUStream s(c10::Stream(c10::Stream::UNSAFE, c10::Device(type, device), id));
    if (type != c10::DeviceType::PrivateUse1) fail("non-npu c10::Stream accepted");
  } catch (const c10::Error&) {
  }
}

void externalHandle(npuStream_t handle, c10::DeviceIndex device, bool mustFail) {
  try {
    const NPUStream s = c10_npu::getStreamFromExternal(handle, device);
    if (mustFail) fail("getStreamFromExternal accepted a garbage or destroyed handle");
    if (!s.isExternal()) fail("getStreamFromExternal returned a managed stream");
    const auto d = s.pack3();
    const NPUStream back = NPUStream::unpack3(d.stream_id, d.device_index, d.device_type);
    if (back != s || back.rawHandle() != handle) fail("external stream does not round-trip");
  } catch (const c10::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  for (int steps = 0; !in.done() && steps < 64; ++steps) {
    switch (in.u8() % 7) {
      case 0: {  // raw triple
        const int64_t id = static_cast<int64_t>(in.u64());
        const auto device = static_cast<c10::DeviceIndex>(static_cast<int8_t>(in.u8()));
        unpack(id, device, deviceType(in.u8()));
        break;
      }
      case 1: {  // structured triple
        const int64_t id = structuredId(in);
        const auto device = deviceIndex(in.u8());
        unpack(id, device, deviceType(in.u8()));
        break;
      }
      case 2: {  // garbage handle (npurt handles are ids, never pointers)
        auto handle = reinterpret_cast<npuStream_t>(static_cast<uintptr_t>(in.u64()));
        const auto device = deviceIndex(in.u8());
        // Only NULL must fail: a garbage id may happen to name a live stream
        // (a managed one's handle, say), which may be wrapped.
        externalHandle(handle, device, handle == nullptr);
        break;
      }
      case 3: {  // create a runtime stream and wrap it
        if (gLive.size() >= kMaxLive || gCreated >= kMaxCreated) break;
        const int device = in.u8() & 1;
        if (npuSetDevice(device) != npuSuccess) break;
        npuStream_t s = nullptr;
        if (npuStreamCreate(&s) != npuSuccess) break;
        ++gCreated;
        gLive.push_back(s);
        externalHandle(s, in.u8() & 1 ? static_cast<c10::DeviceIndex>(-1) : deviceIndex(in.u8()),
                       false);
        break;
      }
      case 4: {  // destroy one; its handle and id must be rejected from now on
        if (gLive.empty()) break;
        const size_t i = in.u8() % gLive.size();
        npuStream_t s = gLive[i];
        gLive.erase(gLive.begin() + static_cast<std::ptrdiff_t>(i));
        if (npuStreamDestroy(s) == npuSuccess) gDead.push_back(s);
        break;
      }
      case 5: {  // a live or destroyed handle, any device
        const bool dead = (in.u8() & 1) && !gDead.empty();
        if (!dead && gLive.empty()) break;
        npuStream_t h = dead ? gDead[in.u8() % gDead.size()] : gLive[in.u8() % gLive.size()];
        externalHandle(h, deviceIndex(in.u8()), dead);
        break;
      }
      default: {  // a managed stream's id, perturbed by one bit
        const int64_t base = (static_cast<int64_t>(in.u8() % 5) << c10_npu::kStreamTypeBits) |
                             (in.u8() & 31);
        const int64_t id = base ^ (int64_t{1} << (in.u8() & 63));
        unpack(id, deviceIndex(in.u8()), c10::DeviceType::PrivateUse1);
        break;
      }
    }
  }
  if (gDead.size() > 64) gDead.erase(gDead.begin(), gDead.begin() + 32);
  return 0;
}
