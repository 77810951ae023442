// See ExternalStreams.h and Note [External stream modes].
#include "core/ExternalStreams.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/TaskQueue.h"

namespace c10_npu::external {
namespace {

constexpr int kMaxDevices = 32;

Mode modeFromEnvironment() {
  const char* v = std::getenv("TORCH_NPU_EXTERNAL_STREAM_MODE");
  if (v == nullptr || v[0] == '\0' || std::strcmp(v, "compat") == 0) return Mode::kCompat;
  if (std::strcmp(v, "full") == 0) return Mode::kFull;
  TORCH_CHECK(false, "TORCH_NPU_EXTERNAL_STREAM_MODE should be 'compat' or 'full', got '", v, "'",
              NPU_ERROR_SUFFIX);
}

std::atomic<int>& modeStorage() {
  static std::atomic<int> m{static_cast<int>(modeFromEnvironment())};
  return m;
}

struct Entry {
  npuStream_t handle = nullptr;
  bool alive = true;
};

// One device's registry. Entries are never removed from `entries` (their
// index is the StreamId's low bits), only marked dead, so an id never names
// a different stream later. `byHandle` holds live entries only.
struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries;
  std::unordered_map<npuStream_t, uint32_t> byHandle;
};

std::array<Registry, kMaxDevices>& registries() {
  // Leaked on purpose: the destroy callback may run during process exit.
  static auto* r = std::make_unique<std::array<Registry, kMaxDevices>>().release();
  return *r;
}

// Note [Destroying an external stream with queued work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The library that owns an external stream may destroy it while PyTorch ops
// for it still sit in the task queue. npurt runs this notification while the
// handle still works, so it first waits until the consumer has submitted
// everything queued for the device (without reporting anything): those ops
// then reach the stream before it dies and run, since a destroyed stream
// keeps running the work it already had (Note [Handle validation]). Only then
// is the entry marked dead, so later uses of the ExternalStream raise.
void onStreamDestroyed(npuStream_t handle, int device, void* /*userData*/) {
  if (device < 0 || device >= kMaxDevices) return;
  Registry& reg = registries()[device];
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (reg.byHandle.find(handle) == reg.byHandle.end()) return;
  }
  queue::waitSubmittedDevice(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.byHandle.find(handle);
  if (it == reg.byHandle.end()) return;
  reg.entries[it->second].alive = false;
  reg.byHandle.erase(it);
}

void subscribeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    uint64_t token = 0;
    NPU_CHECK(npuRegisterStreamDestroyCallback(&onStreamDestroyed, nullptr, &token));
  });
}

std::string hexHandle(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%#zx", reinterpret_cast<size_t>(p));
  return buf;
}

}  // namespace

Mode mode() { return static_cast<Mode>(modeStorage().load(std::memory_order_relaxed)); }

void setMode(Mode m) { modeStorage().store(static_cast<int>(m), std::memory_order_relaxed); }

std::pair<c10::DeviceIndex, c10::StreamId> registerStream(npuStream_t handle,
                                                          c10::DeviceIndex device) {
  TORCH_CHECK(handle != nullptr, "External NPU stream does not support nullptr.", NPU_ERROR_SUFFIX);
  subscribeOnce();
  int owner = -1;
  const npuError_t status = npuStreamGetDevice(handle, &owner);
  TORCH_CHECK(status == npuSuccess, "Invalid external NPU stream handle ", hexHandle(handle), ": ",
              npuGetErrorName(status), " (", npuGetLastErrorMessage(),
              "). Pass a handle created by npuStreamCreate that has not been destroyed.",
              NPU_ERROR_SUFFIX);
  if (device == -1) {
    device = static_cast<c10::DeviceIndex>(owner);
  } else {
    device = checkedDeviceIndex(device);
    TORCH_CHECK(
        device == owner, "External NPU stream ", hexHandle(handle),
        " belongs to device npu:", owner, ", but device npu:", static_cast<int>(device),
        " was given. Pass neither device nor device_index (or device=None) to use the stream's own "
        "device.",
        NPU_ERROR_SUFFIX);
  }
  Registry& reg = registries()[device];
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.byHandle.find(handle);
  uint32_t index = 0;
  if (it != reg.byHandle.end()) {
    index = it->second;
  } else {
    index = static_cast<uint32_t>(reg.entries.size());
    TORCH_CHECK(index < (uint32_t{1} << 30), "Too many external NPU streams on device ",
                static_cast<int>(device), NPU_ERROR_SUFFIX);
    reg.entries.push_back(Entry{handle, true});
    reg.byHandle.emplace(handle, index);
  }
  return {device, kExternalStreamMarker | static_cast<c10::StreamId>(index)};
}

npuStream_t lookup(c10::DeviceIndex device, c10::StreamId id) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices,
              "Invalid device_index: ", static_cast<int>(device), NPU_ERROR_SUFFIX);
  Registry& reg = registries()[device];
  const c10::StreamId index = id & (kExternalStreamMarker - 1);
  std::lock_guard<std::mutex> lock(reg.mutex);
  // Exactly marker | index: an id with other bits set as well would name the
  // same stream under a second id (unequal streams, different hashes).
  TORCH_CHECK(id == (kExternalStreamMarker | index) &&
                  index < static_cast<c10::StreamId>(reg.entries.size()),
              "Unrecognized external NPU stream ", id, " on device ", static_cast<int>(device),
              ". Wrap the runtime handle with ExternalStream(stream_ptr) instead of building "
              "the id yourself.",
              NPU_ERROR_SUFFIX);
  const Entry& e = reg.entries[index];
  TORCH_CHECK(e.alive, "External NPU stream ", hexHandle(e.handle), " (stream id ", id,
              " on device ", static_cast<int>(device),
              ") was destroyed by the library that created it and cannot be used any more.",
              NPU_ERROR_SUFFIX);
  return e.handle;
}

void checkManagedOnly(const NPUStream& stream, const char* api) {
  if (!stream.isExternal() || mode() == Mode::kFull) return;
  if (std::strcmp(api, "NPUStream::synchronize") == 0) {
    TORCH_CHECK(false,
                "External NPU stream is not supported in NPUStream::synchronize. The caller is "
                "responsible for synchronization of external streams.",
                NPU_ERROR_SUFFIX);
  }
  if (std::strcmp(api, "NPUStream::query") == 0) {
    TORCH_CHECK(false,
                "Cannot query external NPU stream status. The caller must track stream "
                "completion externally.",
                NPU_ERROR_SUFFIX);
  }
  TORCH_CHECK(false, "External NPU stream is not supported in ", api,
              ". This path requires a torch_npu-managed stream.", NPU_ERROR_SUFFIX);
}

void checkCurrentStreamNotExternal(c10::DeviceIndex device, const char* api) {
  if (mode() == Mode::kFull || !getCurrentNPUStream(device).isExternal()) return;
  TORCH_CHECK(false, "External NPU stream is not supported in ", api,
              ". This path requires a torch_npu-managed current stream.", NPU_ERROR_SUFFIX);
}

void checkRawHandleAccess(const NPUStream& stream) {
  if (!stream.isExternal() || mode() == Mode::kFull) return;
  TORCH_CHECK(!queue::config().perStreamQueue || !queue::config().queued(),
              "External NPU stream is not supported in NPUStream::stream() with per-stream "
              "task queue.",
              NPU_ERROR_SUFFIX);
}

}  // namespace c10_npu::external
