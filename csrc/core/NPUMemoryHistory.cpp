// The allocator's history recorder and snapshots. See Note [Memory history]
// (NPUMemoryHistory.h).
#include "core/NPUMemoryHistory.h"

#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator {
namespace detail {
namespace {

struct Recorder {
  std::atomic<bool> on{false};  // the hot-path flag: see historyOn()
  std::mutex mutex;             // leaf lock (Note [Allocator lock ordering])
  // Guarded by mutex (read without it only after `on` was seen set, as a
  // hint: an entry recorded while history is being turned off is harmless).
  CreateContextFn contextFn = nullptr;
  RecordContext when = RecordContext::kNever;
  bool trace = false;
  size_t maxEntries = 0;
  std::vector<std::deque<TraceEntry>> traces;  // per device
};

Recorder& recorder() {
  static auto* r = std::make_unique<Recorder>().release();  // leaked, as the allocator
  return *r;
}

int64_t nowUs() { return c10::getTime() / 1000; }

}  // namespace

bool historyOn() noexcept { return recorder().on.load(std::memory_order_relaxed); }

std::shared_ptr<c10::GatheredContext> historyContext(RecordContext atLeast) {
  Recorder& r = recorder();
  CreateContextFn fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.on.load(std::memory_order_relaxed) || r.when < atLeast) return nullptr;
    fn = r.contextFn;
  }
  return fn != nullptr ? fn() : nullptr;  // gathered unlocked: it may take the GIL
}

bool keepsBlockContexts() noexcept {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.on.load(std::memory_order_relaxed) && r.when >= RecordContext::kState;
}

void recordTrace(const char* action, c10::DeviceIndex device, uintptr_t address, size_t size,
                 c10::StreamId stream, const std::shared_ptr<c10::GatheredContext>& context,
                 RecordContext contextFrom, c10::MempoolId_t pool) noexcept {
  Recorder& r = recorder();
  try {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.on.load(std::memory_order_relaxed) || !r.trace) return;
    if (r.traces.size() <= static_cast<size_t>(device)) r.traces.resize(device + 1);
    std::deque<TraceEntry>& trace = r.traces[device];
    TraceEntry entry{action, device, address, size, stream, nowUs(),
                     r.when >= contextFrom ? context : nullptr, pool};
    trace.push_back(std::move(entry));
    while (trace.size() > r.maxEntries) trace.pop_front();
  } catch (...) {
    // Out of memory: a lost history entry is better than a failed free.
  }
}

}  // namespace detail

void recordHistory(bool enabled, CreateContextFn contextFn, size_t maxEntries, RecordContext when,
                   bool traceEnabled, bool clearHistory) {
  TORCH_CHECK(!enabled || maxEntries > 0,
              "_record_memory_history: max_entries must be positive, got ", maxEntries);
  TORCH_CHECK(!enabled || when == RecordContext::kNever || contextFn != nullptr,
              "_record_memory_history: recording stacks needs a context function");
  detail::Recorder& r = detail::recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (clearHistory) r.traces.clear();
  if (enabled) {
    r.contextFn = contextFn;
    r.when = when;
    r.trace = traceEnabled;
    r.maxEntries = maxEntries;
    for (auto& trace : r.traces) {
      while (trace.size() > maxEntries) trace.pop_front();
    }
  }
  r.on.store(enabled, std::memory_order_relaxed);
}

bool isHistoryEnabled() { return detail::historyOn(); }

Snapshot snapshot() {
  detail::CachingAllocator& alloc = detail::allocator();
  Snapshot result;
  if (detail::historyOn()) {
    detail::recordTrace("snapshot", 0, 0, 0, 0, nullptr, RecordContext::kAll);
  }
  for (const auto& device : alloc.devices()) device->snapshotSegments(result.segments);
  {
    detail::Recorder& r = detail::recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    result.traces.resize(alloc.devices().size());
    for (size_t d = 0; d < r.traces.size() && d < result.traces.size(); ++d) {
      result.traces[d].assign(r.traces[d].begin(), r.traces[d].end());
    }
  }
  return result;
}

namespace detail {

void DeviceState::snapshotSegments(std::vector<SegmentInfo>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t first = out.size();
  for (const auto& [ptr, owned] : blocks_) {
    const Block* head = owned.get();
    // The first piece of a segment; of an expandable one, the first piece of
    // each mapped range (Note [Expandable segments]), as CUDA reports them.
    const auto mapped = [](const Block* b) {
      return b != nullptr && b->state != BlockState::kUnmapped;
    };
    if (!mapped(head) || mapped(head->prev)) continue;
    SegmentInfo seg;
    seg.isExpandable = head->segment != nullptr;
    seg.device = device_;
    seg.address = reinterpret_cast<uintptr_t>(head->ptr);
    seg.stream = head->stream;
    seg.isLarge = !head->pool->isSmall;
    if (head->pool->owner != nullptr) seg.pool = head->pool->owner->id;
    seg.context = head->segmentContext;
    for (const Block* b = head; mapped(b); b = b->next) {
      BlockInfo info;
      info.address = reinterpret_cast<uintptr_t>(b->ptr);
      info.size = b->size;
      seg.totalSize += b->size;
      switch (b->state) {
        case BlockState::kAllocated:
          info.state = "active_allocated";
          info.requested = b->requested;
          seg.allocatedSize += b->size;
          seg.activeSize += b->size;
          seg.requestedSize += b->requested;
          info.context = b->context;
          break;
        case BlockState::kCached:
          info.state = "inactive";
          break;
        default:  // freed, waiting for other streams (or never reusable)
          info.state = "active_pending_free";
          info.requested = b->requested;
          seg.activeSize += b->size;
          seg.requestedSize += b->requested;
          info.context = b->context;
          break;
      }
      seg.blocks.push_back(std::move(info));
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
}

}  // namespace detail
}  // namespace c10_npu::NPUCachingAllocator
