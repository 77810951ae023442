// See StreamLimits.h and Note [Stream resource limits on the simulated NPU].
#include "core/StreamLimits.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "core/NPUException.h"

namespace c10_npu::limits {
namespace {

struct Limit {
  int cube = -1;    // -1 = not set
  int vector = -1;

  int& of(Kind kind) { return kind == Kind::kCube ? cube : vector; }
  int of(Kind kind) const { return kind == Kind::kCube ? cube : vector; }
};

struct Table {
  std::mutex mutex;
  std::map<std::pair<int, c10::StreamId>, Limit> streams;  // guarded by mutex
  std::map<int, Limit> devices;                            // guarded by mutex
  // True once any limit was set: lets intraOpThreads skip the lock on the hot
  // path. Relaxed: a launch racing with the first set_*_limit on another
  // thread may or may not see it, like any unsynchronized producer.
  std::atomic<bool> any{false};

  // The limit of one kind for `key`: the stream's, else the device's, else -1.
  // Requires mutex.
  int effectiveLocked(const std::pair<int, c10::StreamId>& key, Kind kind) const {
    if (auto it = streams.find(key); it != streams.end() && it->second.of(kind) != -1) {
      return it->second.of(kind);
    }
    auto it = devices.find(key.first);
    return it == devices.end() ? -1 : it->second.of(kind);
  }
};

Table& table() {
  // Leaked on purpose: op launches may consult it during process exit.
  static auto* t = new Table();
  return *t;
}

int coreCount(c10::DeviceIndex device) {
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device));
  return prop.coreCount;
}

void checkCoreNumber(c10::DeviceIndex device, int64_t value) {
  const int cores = coreCount(device);
  TORCH_CHECK(value >= 1 && value <= cores, "Expected a core number in [1, ", cores,
              "] (the simulated device npu:", static_cast<int>(device), " has ", cores,
              " cores, NPU_SIM_CORES) or -1 to leave it unchanged, but got ", value,
              NPU_ERROR_SUFFIX);
}

std::pair<int, c10::StreamId> key(const NPUStream& s) {
  return {static_cast<int>(s.device_index()), s.id()};
}

}  // namespace

void setStreamLimit(const NPUStream& stream, Kind kind, int64_t value) {
  checkCoreNumber(stream.device_index(), value);
  (void)stream.rawHandle();  // raises for a destroyed external stream
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.streams[key(stream)].of(kind) = static_cast<int>(value);
  t.any.store(true, std::memory_order_relaxed);
}

void resetStreamLimit(const NPUStream& stream) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.streams.erase(key(stream));
}

int getStreamLimit(const NPUStream& stream, Kind kind) {
  const int cores = coreCount(stream.device_index());
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const int v = t.effectiveLocked(key(stream), kind);
  return v == -1 ? cores : v;
}

void setDeviceLimit(c10::DeviceIndex device, Kind kind, int64_t value) {
  checkCoreNumber(device, value);  // also rejects a device that does not exist
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.devices[static_cast<int>(device)].of(kind) = static_cast<int>(value);
  t.any.store(true, std::memory_order_relaxed);
}

int getDeviceLimit(c10::DeviceIndex device, Kind kind) {
  const int cores = coreCount(device);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.devices.find(static_cast<int>(device));
  const int v = it == t.devices.end() ? -1 : it->second.of(kind);
  return v == -1 ? cores : v;
}

int intraOpThreads(const NPUStream& stream) {
  Table& t = table();
  if (!t.any.load(std::memory_order_relaxed)) return 0;  // hot path
  std::lock_guard<std::mutex> lock(t.mutex);
  const auto k = key(stream);
  const int cube = t.effectiveLocked(k, Kind::kCube);
  const int vector = t.effectiveLocked(k, Kind::kVector);
  if (cube == -1) return std::max(vector, 0);
  if (vector == -1) return cube;
  return std::min(cube, vector);
}

}  // namespace c10_npu::limits
