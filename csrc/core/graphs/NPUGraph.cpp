// See NPUGraph.h and Note [Why capture and replay live in the framework].
#include "core/graphs/NPUGraph.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>
#include <utility>

#include "core/ExternalStreams.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUGenerator.h"
#include "core/TaskQueue.h"
#include "core/logging/Loggers.h"

namespace c10_npu {
namespace {

// Graph-owned pool ids are {n, 0}; user pools (MemPool) are {0, n}.
std::atomic<c10::CaptureId_t> gNextGraphPool{1};

// The task a replay queues before the launch: stores the replay's (seed,
// offset) per generator. See Note [Random numbers of captured ops].
struct RngStateTask {
  struct Entry {
    std::shared_ptr<GraphRngState> state;
    uint64_t seed;
    uint64_t base;
  };
  std::vector<Entry> entries;
};

int runRngState(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  for (const auto& e : static_cast<RngStateTask*>(user)->entries) {
    // relaxed: the runtime orders this task before the graph's nodes.
    e.state->seed.store(e.seed, std::memory_order_relaxed);
    e.state->base.store(e.base, std::memory_order_relaxed);
  }
  return 0;
}

void releaseRngState(void* user) { std::unique_ptr<RngStateTask> owned(static_cast<RngStateTask*>(user)); }

// Note [A failing replay poisons the graph's outputs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A replay whose node fails skips the nodes not started yet (Note [Graph
// launch]): their outputs keep the previous replay's values, which look
// valid. So every replay is followed, on its stream, by a sentinel task.
// The failure puts the stream in its failure state, which discards the
// sentinel instead of running it; the discarded sentinel marks every storage
// the graph writes as poisoned with the replay's error (Note [Poisoned
// memory]), so reading any output raises that error instead of returning
// stale numbers. A later successful replay heals each output it writes whole.
struct ReplaySentinel {
  std::shared_ptr<graphs::CaptureState> graph;
  npuStream_t stream;
  bool ran = false;
};

int runSentinel(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  static_cast<ReplaySentinel*>(user)->ran = true;
  return 0;
}

void releaseSentinel(void* user) {
  std::unique_ptr<ReplaySentinel> s(static_cast<ReplaySentinel*>(user));
  if (s->ran) return;
  try {
    std::string why = "an earlier failure of the stream discarded it";
    if (npuStreamPeekAtLastError(s->stream) != npuSuccess) why = npuGetLastErrorMessage();
    auto message = std::make_shared<const std::string>("NPUGraph::replay failed: " + why);
    std::lock_guard<std::mutex> lock(s->graph->mutex);
    for (const auto& storage : s->graph->writes) poison::mark(storage, message);
  } catch (...) {
    // Out of memory for the message: nothing better to do on an executor.
  }
}

template <typename T>
void launchOwned(const NPUStream& stream, const char* name, int (*run)(void*, char*, size_t),
                 void (*release)(void*), std::unique_ptr<T> data) {
  npuTask task{};
  task.name = name;
  task.run = run;
  task.release = release;
  task.userData = data.release();  // queue::launch owns it from here on, also on failure
  queue::launch(stream, task);
}

void waitForQueue(const NPUStream& stream) {
  queue::waitSubmittedDevice(stream.device_index());
}

}  // namespace

NPUGraph::~NPUGraph() { reset(); }

void NPUGraph::capture_begin(c10::MempoolId_t pool, npuStreamCaptureMode mode) {
  TORCH_NPU_LOGD(npu_logging::kNPUGraphLogger, "NPUGRAPH Capture begin");
  TORCH_CHECK(queue::config().mode != queue::Mode::kBusyPoll,
              "Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please "
              "export TASK_QUEUE_ENABLE=1/0.",
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(!hasGraphExec_ && !capturing_,
              "This NPUGraph instance already owns a captured graph. "
              "To capture a new graph, create a new instance.");
  const NPUStream stream = getCurrentNPUStream();
  external::checkManagedOnly(stream, "NPUGraph::capture_begin");
  TORCH_CHECK(stream != getDefaultNPUStream(stream.device_index()),
              "NPU graphs must be captured on a non-default stream. "
              "(However, after capture, it's ok to replay them on the "
              "default stream.)");
  device_ = stream.device_index();
  mempoolId_ = (pool.first != 0 || pool.second != 0)
                   ? pool
                   : c10::MempoolId_t{gNextGraphPool.fetch_add(1, std::memory_order_relaxed), 0};
  // Work queued before the begin runs eagerly: Note [Capture is visible at enqueue].
  waitForQueue(stream);
  NPU_CHECK(npuStreamBeginCapture(stream.rawHandle(), mode));
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  uint64_t id = 0;
  NPU_CHECK(npuStreamGetCaptureInfo(stream.rawHandle(), &status, &id));
  auto capture = std::make_shared<graphs::CaptureState>();
  capture->captureId = id;
  capture->device = device_;
  capture->graph = this;
  graphs::registerCapture(id, capture);
  capture_ = std::move(capture);
  captureStream_ = stream;
  capturing_ = true;
  // Allocations of every stream recording into this capture (forks included)
  // come from the graph's pool; the route takes a use of the pool, held until
  // reset().
  NPUCachingAllocator::beginAllocateToPool(device_, mempoolId_, [id](const NPUStream& s) {
    auto recorder = graphs::recorderOf(s);
    return recorder != nullptr && recorder->captureId == id;
  });
  TORCH_NPU_LOGD(npu_logging::kNPUGraphLogger,
                 "NPUGRAPH Capture begin done: capture_id=%llu, capture_dev=%d, "
                 "mempool_id=(%llu,%llu), stream=%lld, capture_mode=%d",
                 static_cast<unsigned long long>(id), static_cast<int>(device_),
                 static_cast<unsigned long long>(mempoolId_.first),
                 static_cast<unsigned long long>(mempoolId_.second),
                 static_cast<long long>(stream.id()), static_cast<int>(mode));
}

void NPUGraph::endCaptureOnError() noexcept {
  graphs::unregisterCapture(capture_->captureId);
  releaseConditions();
  try {
    NPUCachingAllocator::endAllocateToPool(device_, mempoolId_);
    NPUCachingAllocator::releasePool(device_, mempoolId_);
  } catch (...) {
    // The route was registered by capture_begin: cannot fail.
  }
  capture_.reset();
  capturing_ = false;
}

void NPUGraph::capture_end() {
  TORCH_NPU_LOGD(npu_logging::kNPUGraphLogger, "NPUGRAPH Capture end");
  const NPUStream stream = getCurrentNPUStream(device_ >= 0 ? device_ : -1);
  external::checkManagedOnly(stream, "NPUGraph::capture_end");
  TORCH_CHECK(!captureStream_.has_value() || stream == *captureStream_,
              "Capture must end on the same stream it began on.");
  TORCH_CHECK(capturing_, "capture_end() called before capture_begin().");
  waitForQueue(stream);
  npuGraph_t graph = nullptr;
  const npuError_t status = npuStreamEndCapture(stream.rawHandle(), &graph);
  if (status == npuErrorStreamCaptureWrongThread) {
    NPU_CHECK(status);  // the capture goes on
  }
  if (status != npuSuccess) {
    const std::string message = npuGetLastErrorMessage();
    endCaptureOnError();
    TORCH_CHECK(false, "NPU graph capture failed: ", npuGetErrorName(status), ": ", message,
                NPU_ERROR_SUFFIX);
  }
  size_t nodes = 0;
  if (npuGraphGetNodeCount(graph, &nodes) == npuSuccess && nodes == 0) {
    // CUDA's warning: an empty capture is almost always a mistake.
    TORCH_WARN("The NPU Graph is empty. This usually means that the graph was attempted to be "
               "captured on wrong device or stream.");
  }
  npuGraphExec_t exec = nullptr;
  const npuError_t instantiated = npuGraphInstantiate(&exec, graph, 0);
  if (instantiated != npuSuccess) {
    const std::string message = npuGetLastErrorMessage();
    (void)npuGraphDestroy(graph);
    endCaptureOnError();
    TORCH_CHECK(false, "NPU graph instantiation failed: ", npuGetErrorName(instantiated), ": ",
                message, NPU_ERROR_SUFFIX);
  }
  graphs::unregisterCapture(capture_->captureId);
  NPUCachingAllocator::endAllocateToPool(device_, mempoolId_);
  {
    std::lock_guard<std::mutex> lock(capture_->mutex);
    capture_->exec = exec;
    capture_->captureId = 0;
  }
  graph_ = graph;
  exec_ = exec;
  capturing_ = false;
  hasGraphExec_ = true;
  TORCH_NPU_LOGD(npu_logging::kNPUGraphLogger,
                 "NPUGRAPH Capture end done: nodes=%zu, has_graph_exec=%d", nodes,
                 static_cast<int>(hasGraphExec_));
}

void NPUGraph::queueRngState(const NPUStream& stream) {
  auto task = std::make_unique<RngStateTask>();
  {
    std::lock_guard<std::mutex> lock(capture_->mutex);
    for (auto& rng : capture_->rngs) {
      auto* impl = rng.generator.get<NPUGeneratorImpl>();
      std::lock_guard<std::mutex> genLock(impl->mutex_);
      const uint64_t base = impl->get_offset();
      impl->set_offset(base + rng.increment);
      task->entries.push_back({rng.state, impl->current_seed(), base});
    }
  }
  if (task->entries.empty()) return;
  // The previous replay may still read the states: order after it.
  if (lastReplayStream_.has_value() && *lastReplayStream_ != stream) lastReplayDone_->block(stream);
  launchOwned(stream, "NPUGraph rng state", &runRngState, &releaseRngState, std::move(task));
}

void NPUGraph::replay() {
  TORCH_NPU_LOGD(npu_logging::kNPUGraphLogger, "NPUGRAPH Replay device=%d",
                 static_cast<int>(device_));
  TORCH_CHECK(hasGraphExec_, "Called NPUGraph::replay without a preceding successful capture.");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  const NPUStream stream = getCurrentNPUStream(device_);
  external::checkManagedOnly(stream, "NPUGraph::replay");
  // Note [Replay inside another capture]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // npurt refuses a graph launch onto a capturing stream and invalidates the
  // capture, as CUDA does; through the task queue that refusal would surface
  // twice (at capture end and, as the stream's launch failure, at its next
  // synchronize). Refuse at the call instead, before anything is queued or
  // any generator moves: the capture and the stream stay usable, as with a
  // host sync inside a capture (Note [Host syncs during graph capture]).
  TORCH_CHECK(!(graphs::anyCapture() && graphs::isCapturing(stream)),
              "NPUGraph::replay: the current NPU stream is capturing a graph, and a graph "
              "cannot be replayed into another capture (operation not permitted when stream is "
              "capturing). Replay it before or after the capture, or run its operations inside "
              "the capture.",
              NPU_ERROR_SUFFIX);
  queueRngState(stream);
  queue::launchGraph(stream, exec_);
  launchOwned(stream, "NPUGraph replay check", &runSentinel, &releaseSentinel,
              std::make_unique<ReplaySentinel>(ReplaySentinel{capture_, stream.rawHandle()}));
  if (!capture_->rngs.empty()) {
    if (!lastReplayDone_) lastReplayDone_ = std::make_unique<NPUEvent>();
    lastReplayDone_->record(stream);
    lastReplayStream_ = stream;
  }
}

void NPUGraph::reset() noexcept {
  try {
    if (capturing_) {
      // Destroyed or reset mid-capture: end the capture and drop what it recorded.
      endConditionalBodies();
      waitForQueue(*captureStream_);
      npuGraph_t graph = nullptr;
      if (npuStreamEndCapture(captureStream_->rawHandle(), &graph) == npuSuccess) {
        (void)npuGraphDestroy(graph);
      }
      endCaptureOnError();
    }
    if (hasGraphExec_) {
      // Queued replays name the exec: hand them to the runtime first (they
      // still run; the runtime keeps what they need).
      waitForQueue(*captureStream_);
      {
        std::lock_guard<std::mutex> lock(capture_->mutex);
        capture_->exec = nullptr;
      }
      (void)npuGraphExecDestroy(exec_);
      (void)npuGraphDestroy(graph_);
      exec_ = nullptr;
      graph_ = nullptr;
      releaseConditions();
      NPUCachingAllocator::releasePool(device_, mempoolId_);
      hasGraphExec_ = false;
    }
  } catch (const std::exception& e) {
    TORCH_WARN("NPUGraph::reset: ", e.what());
  }
  capture_.reset();
  captureStream_.reset();
  lastReplayStream_.reset();
  lastReplayDone_.reset();
}

c10::MempoolId_t NPUGraph::pool() const {
  TORCH_CHECK(hasGraphExec_ || capturing_,
              "Called NPUGraph::pool() without a preceding successful capture.");
  return mempoolId_;
}

void NPUGraph::debug_dump(const std::string& path) {
  if (!hasGraphExec_) {
    TORCH_WARN("Called NPUGraph::debug_dump without a preceding successful capture.");
    return;
  }
  NPU_CHECK(npuGraphDebugDotPrint(graph_, path.c_str(), 0));
}

NPUGraph* NPUGraph::get_currently_capturing_graph() {
  // Note [The currently capturing graph]
  const NPUStream stream = getCurrentNPUStream();
  npuStreamCaptureStatus status = npuStreamCaptureStatusNone;
  uint64_t id = 0;
  if (!stream.isExternal() || external::mode() == external::Mode::kFull) {
    NPU_CHECK(npuStreamGetCaptureInfo(stream.rawHandle(), &status, &id));
  }
  TORCH_CHECK(status == npuStreamCaptureStatusActive,
              "The current NPU stream is not currently capturing.", NPU_ERROR_SUFFIX);
  NPUGraph* graph = graphs::capturingGraph(id);
  TORCH_CHECK(graph != nullptr,
              "get_currently_capturing_graph() can be used only between capture_begin() and "
              "capture_end(). Did you use a stream without making it depend upon the original "
              "stream used for capture?",
              NPU_ERROR_SUFFIX);
  return graph;
}

NPUGraph* NPUGraph::get_currently_capturing_npu_graph() {
  NPUGraph* graph = get_currently_capturing_graph();
  TORCH_CHECK(graph->owner_ != Owner::kAcceleratorGraph,
              "torch.npu.NPUGraph.get_currently_capturing_graph() is not supported during "
              "torch.accelerator.Graph capture.",
              NPU_ERROR_SUFFIX);
  return graph;
}

c10::MempoolId_t graphPoolHandle() {
  // A user-created handle, as PyTorch's graph_pool_handle(): {0, n} from the
  // counter MemPool ids come from; graph-owned pools are {n, 0}.
  return NPUCachingAllocator::newMempoolId();
}

bool isCurrentStreamCapturing() { return graphs::isCapturing(getCurrentNPUStream()); }

}  // namespace c10_npu
