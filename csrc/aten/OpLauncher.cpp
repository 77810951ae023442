// See OpLauncher.h and Note [Ops run on streams].
#include "aten/OpLauncher.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>

#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/RaceCheck.h"
#include "core/TaskQueue.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "npurt/npurt.hpp"

namespace c10_npu::aten {

namespace detail {
namespace {
// Head of the parked list. See Note [Task captures are released on producer
// threads]. Nodes are pushed by executors and taken all at once by hosts.
std::atomic<Deferred*> gDeferred{nullptr};
}  // namespace

void deferRelease(void* user, void (*destroy)(void*)) noexcept {
  Deferred* node = nullptr;
  try {
    node = std::make_unique<Deferred>(Deferred{user, destroy, nullptr}).release();
  } catch (const std::bad_alloc&) {
    return;  // out of memory: leak the captures rather than crash an executor
  }
  // release: the node's fields must be visible to the thread that takes it.
  node->next = gDeferred.load(std::memory_order_relaxed);
  while (!gDeferred.compare_exchange_weak(node->next, node, std::memory_order_release,
                                          std::memory_order_relaxed)) {
  }
}

// OpenMP's per-thread thread count (nthreads-var). Declared here rather than
// through <omp.h>: they resolve to the OpenMP runtime that libtorch_cpu
// itself loads, which is the one ATen's kernels use.
extern "C" {
void omp_set_num_threads(int);
int omp_get_max_threads(void);
}

IntraOpCap::IntraOpCap(int threads) noexcept {
  if (threads <= 0) return;
  const int current = omp_get_max_threads();
  if (threads >= current) return;
  previous_ = current;
  omp_set_num_threads(threads);
}

IntraOpCap::~IntraOpCap() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

void initExecutorThread() noexcept {
  thread_local bool initialised = false;
  if (initialised) return;
  initialised = true;
  at::init_num_threads();
}

void releaseDeferred() noexcept {
  // relaxed load first: the common case (nothing parked) costs one read.
  if (gDeferred.load(std::memory_order_relaxed) == nullptr) return;
  Deferred* node = gDeferred.exchange(nullptr, std::memory_order_acquire);
  while (node != nullptr) {
    std::unique_ptr<Deferred> owned(node);
    node = node->next;
    owned->destroy(owned->user);
  }
}

namespace {

// Streams that have had tasks holding device memory, per device. Streams
// are few (pools and external streams), so the sets stay small; an entry is
// dropped once its stream cannot be reached (a destroyed external stream).
struct HoldingStreams {
  std::mutex mutex;
  std::unordered_map<c10::DeviceIndex, std::unordered_set<c10::StreamId>> byDevice;
};

HoldingStreams& holdingStreams() {
  static auto* h = std::make_unique<HoldingStreams>().release();  // leaked: used at exit
  return *h;
}

// The allocator's FreeMemoryCallback: waits, through events (which never
// report task failures: those belong to their streams' synchronize), for
// the work queued so far on the device's holding streams, then destroys the
// finished tasks' captures. Runs on the allocating (host) thread.
void freeHeldMemory(c10::DeviceIndex device) {
  std::vector<c10::StreamId> ids;
  {
    std::lock_guard<std::mutex> lock(holdingStreams().mutex);
    auto& set = holdingStreams().byDevice[device];
    ids.assign(set.begin(), set.end());
  }
  for (c10::StreamId id : ids) {
    try {
      const NPUStream stream = NPUStream::unpack3(id, device, c10::DeviceType::PrivateUse1);
      queue::waitSubmitted(stream);
      npuEvent_t raw = nullptr;
      NPU_CHECK(npuEventCreateWithFlags(&raw, npuEventDisableTiming));
      const npurt::EventHandle event(raw);
      NPU_CHECK(npuEventRecord(raw, stream.rawHandle()));
      NPU_CHECK(npuEventSynchronize(raw));
    } catch (const c10::Error&) {
      std::lock_guard<std::mutex> lock(holdingStreams().mutex);
      holdingStreams().byDevice[device].erase(id);  // unreachable: nothing to wait for
    }
  }
  releaseDeferred();
}

const bool kFreeHeldMemoryRegistered = [] {
  NPUCachingAllocator::registerFreeMemoryCallback(&freeHeldMemory);
  return true;
}();

}  // namespace

void noteHeldByTask(const NPUStream& stream) {
  std::lock_guard<std::mutex> lock(holdingStreams().mutex);
  holdingStreams().byDevice[stream.device_index()].insert(stream.id());
}

poison::Message notRunMessage(const NPUStream& stream, const char* name) noexcept {
  try {
    if (const std::string* refused = queue::failedLaunchMessage()) {
      return std::make_shared<const std::string>(*refused);
    }
    // The task failed or was discarded behind a failure: its stream holds
    // the failure (npurt records it before it releases the task).
    if (npuStreamPeekAtLastError(stream.rawHandle()) == npuErrorLaunchFailure) {
      // The last-error message is "<function>: <failure>"; keep the failure.
      std::string message = npuGetLastErrorMessage();
      constexpr std::string_view kPrefix = "npuStreamPeekAtLastError: ";
      if (message.compare(0, kPrefix.size(), kPrefix) == 0) message.erase(0, kPrefix.size());
      return std::make_shared<const std::string>(std::move(message));
    }
    return std::make_shared<const std::string>(
        std::string("task '") + name + "' did not run (its stream's failure was already reported)");
  } catch (...) {
    return nullptr;  // out of memory: no poison rather than a crash
  }
}

poison::Message failureMessage(const NPUStream& stream, const char* name,
                               const char* what) noexcept {
  try {
    return std::make_shared<const std::string>(std::string("task '") + name + "' failed on npu:" +
                                               std::to_string(stream.device_index()) + ": " + what);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace detail

namespace {

// The bytes `npu` spans, from its first element to its last (a strided view
// spans the gaps between its elements too), for the race detector.
npuMemAccess span(const at::Tensor& npu, unsigned mode) {
  const auto* base = static_cast<const char*>(npu.storage().data());
  if (base == nullptr || npu.numel() == 0) return npuMemAccess{nullptr, 0, mode};
  int64_t last = 0;  // offset of the last element, in elements
  for (int64_t d = 0; d < npu.dim(); ++d) last += (npu.size(d) - 1) * std::abs(npu.stride(d));
  const auto itemsize = static_cast<int64_t>(npu.itemsize());
  return npuMemAccess{base + npu.storage_offset() * itemsize,
                      static_cast<size_t>((last + 1) * itemsize), mode};
}

}  // namespace

void TaskAccess::read(const at::Tensor& npu) {
  if (!npu.defined() || !npu.has_storage()) return;
  reads.push_back(npu.storage().getWeakStorageImpl());
  if (racecheck::enabled()) [[unlikely]]
    declared.push_back(span(npu, npuMemAccessRead));
}

void TaskAccess::write(const at::Tensor& npu) {
  if (!npu.defined() || !npu.has_storage()) return;
  if (racecheck::enabled()) [[unlikely]]
    declared.push_back(span(npu, npuMemAccessWrite));
  const c10::Storage& storage = npu.storage();
  const bool whole = npu.storage_offset() == 0 && npu.is_non_overlapping_and_dense() &&
                     static_cast<size_t>(npu.numel()) * npu.itemsize() >= storage.nbytes();
  writes.push_back(Write{storage.getWeakStorageImpl(), whole});
}

poison::Message TaskAccess::poisonedRead() const {
  for (const poison::StorageRef& r : reads) {
    if (poison::Message m = poison::find(r._unsafe_get_target())) return m;
  }
  return nullptr;
}

void TaskAccess::poisonWrites(const poison::Message& message) const noexcept {
  for (const Write& w : writes) poison::mark(w.storage, message);
}

void TaskAccess::clearWholeWrites() const noexcept {
  for (const Write& w : writes) {
    if (w.whole) poison::clear(w.storage._unsafe_get_target());
  }
}

}  // namespace c10_npu::aten
