// See CaptureRegistry.h and Note [Capture is visible at enqueue].
#include "core/graphs/CaptureRegistry.h"

#include <c10/util/Exception.h>

#include <map>
#include <string>
#include <utility>

#include "core/NPUException.h"

namespace c10_npu::graphs {
namespace {

// Captures in progress and streams collecting updates. `active` counts both,
// so that the launch path looks at nothing else while it is zero.
struct Registry {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<CaptureState>> captures;  // by npurt capture id
  struct Update {
    std::shared_ptr<CaptureState> graph;
    npuTaskGroup_t group = 0;
    std::vector<npuTask> tasks;
  };
  std::map<std::pair<int, c10::StreamId>, Update> updates;  // by (device, stream id)
  std::atomic<int> active{0};
};

Registry& registry() {
  static auto* r = std::make_unique<Registry>().release();  // leaked: used at exit
  return *r;
}

std::pair<int, c10::StreamId> key(const NPUStream& stream) {
  return {stream.device_index(), stream.id()};
}

void releaseAll(std::vector<npuTask>& tasks) noexcept {
  for (npuTask& t : tasks) {
    if (t.release != nullptr) t.release(t.userData);
  }
  tasks.clear();
}

}  // namespace

CaptureState::Rng& CaptureState::rngOfLocked(const at::Generator& generator) {
  for (Rng& rng : rngs) {
    if (rng.generator == generator) return rng;
  }
  return rngs.emplace_back(Rng{generator, std::make_shared<GraphRngState>(), 0});
}

SeedReservation CaptureState::reserve(const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(mutex);
  Rng& rng = rngOfLocked(generator);
  return SeedReservation{0, rng.state, rng.increment++};
}

uint64_t CaptureState::offsetOf(const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(mutex);
  return rngOfLocked(generator).increment;
}

void CaptureState::setOffset(const at::Generator& generator, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex);
  rngOfLocked(generator).increment = offset;
}

void CaptureState::noteWrite(const poison::StorageRef& storage) {
  std::lock_guard<std::mutex> lock(mutex);
  writes.push_back(storage);
}

bool anyCapture() noexcept {
  // relaxed: a thread that began a capture (or an update) orders its own
  // later launches; other threads' launches race with the begin anyway.
  return registry().active.load(std::memory_order_relaxed) > 0;
}

void registerCapture(uint64_t captureId, const std::shared_ptr<CaptureState>& capture) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.captures[captureId] = capture;
  r.active.fetch_add(1, std::memory_order_relaxed);
}

void unregisterCapture(uint64_t captureId) noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.captures.erase(captureId) != 0) r.active.fetch_sub(1, std::memory_order_relaxed);
}

NPUGraph* capturingGraph(uint64_t captureId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.captures.find(captureId);
  return it == r.captures.end() ? nullptr : it->second->graph;
}

bool isCapturing(const NPUStream& stream) {
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  if (npuStreamIsCapturing(stream.rawHandle(), &status) != npuSuccess) return false;
  return status != npuStreamCaptureStatusNone;
}

std::shared_ptr<CaptureState> recorderOf(const NPUStream& stream) {
  if (!anyCapture()) return nullptr;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.updates.find(key(stream));
    if (it != r.updates.end()) return it->second.graph;
    if (r.captures.empty()) return nullptr;
  }
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  uint64_t id = 0;
  if (npuStreamGetCaptureInfo(stream.rawHandle(), &status, &id) != npuSuccess || id == 0) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.captures.find(id);
  return it == r.captures.end() ? nullptr : it->second;
}

void beginUpdate(const NPUStream& stream, std::shared_ptr<CaptureState> graph,
                 npuTaskGroup_t group) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TORCH_CHECK(r.updates.count(key(stream)) == 0,
              "graph_task_update_begin: the stream is already between graph_task_update_begin "
              "and graph_task_update_end; call graph_task_update_end first.",
              NPU_ERROR_SUFFIX);
  r.updates.emplace(key(stream), Registry::Update{std::move(graph), group, {}});
  r.active.fetch_add(1, std::memory_order_relaxed);
}

bool collect(const NPUStream& stream, const npuTask& task) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.updates.find(key(stream));
  if (it == r.updates.end()) return false;
  it->second.tasks.push_back(task);
  return true;
}

void endUpdate(const NPUStream& stream) {
  Registry& r = registry();
  Registry::Update update;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.updates.find(key(stream));
    TORCH_CHECK(it != r.updates.end(),
                "graph_task_update_end: no graph_task_update_begin on this stream.",
                NPU_ERROR_SUFFIX);
    update = std::move(it->second);
    r.updates.erase(it);
    r.active.fetch_sub(1, std::memory_order_relaxed);
  }
  npuGraphExec_t exec = nullptr;
  {
    std::lock_guard<std::mutex> lock(update.graph->mutex);
    exec = update.graph->exec;
  }
  if (exec == nullptr) {
    releaseAll(update.tasks);
    TORCH_CHECK(false,
                "graph_task_update_end: the graph of this task group has no captured graph any "
                "more (it was reset or destroyed, or its capture failed).",
                NPU_ERROR_SUFFIX);
  }
  const npuError_t status =
      npuGraphExecUpdateTaskGroup(exec, update.group, update.tasks.data(), update.tasks.size());
  if (status != npuSuccess) {
    const std::string message = npuGetLastErrorMessage();
    const size_t count = update.tasks.size();
    releaseAll(update.tasks);  // on error the caller keeps them
    TORCH_CHECK(false, "graph_task_update_end: the ", count,
                " op launch(es) issued between graph_task_update_begin and graph_task_update_end "
                "do not match the task group captured with graph_task_group_begin/end (the same "
                "ops, in the same order, are needed): ",
                npuGetErrorName(status), ": ", message, NPU_ERROR_SUFFIX);
  }
}

}  // namespace c10_npu::graphs
