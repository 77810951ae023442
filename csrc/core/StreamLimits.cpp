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
};

struct Table {
  std::mutex mutex;
  std::map<std::pair<int, c10::StreamId>, Limit> limits;  // guarded by mutex
  // True once any limit was set: lets intraOpThreads skip the lock on the hot
  // path. Relaxed: a launch racing with the first set_stream_limit on another
  // thread may or may not see it, like any unsynchronized producer.
  std::atomic<bool> any{false};
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

std::pair<int, c10::StreamId> key(const NPUStream& s) {
  return {static_cast<int>(s.device_index()), s.id()};
}

}  // namespace

void setStreamLimit(const NPUStream& stream, Kind kind, int64_t value) {
  const int cores = coreCount(stream.device_index());
  TORCH_CHECK(value >= 1 && value <= cores, "Expected a core number in [1, ", cores,
              "] (the simulated device npu:", static_cast<int>(stream.device_index()), " has ",
              cores, " cores, NPU_SIM_CORES) or -1 to leave it unchanged, but got ", value,
              NPU_ERROR_SUFFIX);
  (void)stream.rawHandle();  // raises for a destroyed external stream
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  Limit& l = t.limits[key(stream)];
  (kind == Kind::kCube ? l.cube : l.vector) = static_cast<int>(value);
  t.any.store(true, std::memory_order_relaxed);
}

void resetStreamLimit(const NPUStream& stream) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.limits.erase(key(stream));
}

int getStreamLimit(const NPUStream& stream, Kind kind) {
  const int cores = coreCount(stream.device_index());
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.limits.find(key(stream));
  if (it == t.limits.end()) return cores;
  const int v = kind == Kind::kCube ? it->second.cube : it->second.vector;
  return v == -1 ? cores : v;
}

int intraOpThreads(const NPUStream& stream) {
  Table& t = table();
  if (!t.any.load(std::memory_order_relaxed)) return 0;  // hot path
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.limits.find(key(stream));
  if (it == t.limits.end()) return 0;
  const Limit& l = it->second;
  if (l.cube == -1) return std::max(l.vector, 0);
  if (l.vector == -1) return l.cube;
  return std::min(l.cube, l.vector);
}

}  // namespace c10_npu::limits
