// Memory history and snapshots of the caching allocator, in CUDA's terms
// (torch.cuda.memory._record_memory_history, _snapshot), so that PyTorch's
// torch/cuda/_memory_viz.py and pytorch.org/memory_viz read ours.
//
// Layer: framework core. Stacks are opaque c10::GatheredContext objects made
// by a function the binding installs (torch::CapturedTraceback, with Python
// and C++ frames); this layer only stores them.
//
// Note [Memory history]
// ~~~~~~~~~~~~~~~~~~~~~
// While history is on (recordHistory(enabled=true)):
//  - with `when` >= kState, every allocated block keeps the stack of its
//    allocation and every segment the stack of the allocation that created
//    it; a snapshot reports them as the blocks' and segments' frames;
//  - the trace of each device (when `traceEnabled`) records, in order:
//    alloc (a block handed out), free_requested (its DataPtr freed),
//    free_completed (back in its pool: at once, or after the events of the
//    other streams that used it), segment_alloc / segment_free (npuMalloc /
//    npuFree of a segment), oom (with the device's free bytes) and snapshot
//    (a snapshot was taken); with `when` >= kAlloc alloc and segment_alloc
//    entries carry the stack, with kAll also the frees. At most
//    `maxEntries` entries per device are kept, the oldest dropped first.
// Stacks are gathered on the allocating or freeing thread before the
// allocator's lock is taken. While history is off, each allocation and free
// tests one relaxed atomic flag and nothing else.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10_npu::NPUCachingAllocator {

// Which events keep a stack (CUDA's RecordContext).
enum class RecordContext { kNever = 0, kState = 1, kAlloc = 2, kAll = 3 };

// Gathers the calling thread's stack; may return nullptr (e.g. a thread
// that cannot see Python). Must not allocate device memory.
using CreateContextFn = std::shared_ptr<c10::GatheredContext> (*)();

// Turns history on (enabled) or off. With enabled, `contextFn` is used for
// the events `when` names (none for kNever; contextFn may be null only
// then), `traceEnabled` keeps the per-device trace and `maxEntries` (> 0)
// bounds it. clearHistory drops the recorded trace entries. Turning off keeps
// the trace (for a snapshot taken afterwards) and stops recording. Raises
// for maxEntries == 0 or a missing contextFn. Thread-safe.
void recordHistory(bool enabled, CreateContextFn contextFn, size_t maxEntries,
                   RecordContext when, bool traceEnabled, bool clearHistory);

// True while history is on. Thread-safe.
bool isHistoryEnabled();

struct BlockInfo {
  uintptr_t address = 0;
  size_t size = 0;
  size_t requested = 0;  // bytes asked for (0 unless allocated)
  // "active_allocated", "active_pending_free" (freed, waiting for other
  // streams' events) or "inactive" (cached).
  const char* state = "inactive";
  std::shared_ptr<c10::GatheredContext> context;  // of its allocation, if kept
};

struct SegmentInfo {
  c10::DeviceIndex device = 0;
  uintptr_t address = 0;
  size_t totalSize = 0;
  size_t allocatedSize = 0;  // blocks active_allocated
  size_t activeSize = 0;     // allocated or pending
  size_t requestedSize = 0;
  c10::StreamId stream = 0;  // the allocation stream of every block
  bool isLarge = false;
  bool isExpandable = false;    // one mapped range of an expandable segment
  c10::MempoolId_t pool{0, 0};  // {0, 0}: the default pools
  std::shared_ptr<c10::GatheredContext> context;  // of the segment's creation
  std::vector<BlockInfo> blocks;                  // by address
};

struct TraceEntry {
  // "alloc", "free_requested", "free_completed", "segment_alloc",
  // "segment_free", "segment_map", "segment_unmap", "oom" or "snapshot".
  const char* action = "";
  c10::DeviceIndex device = 0;
  uintptr_t address = 0;  // for oom: the device's free bytes (CUDA's device_free)
  size_t size = 0;
  c10::StreamId stream = 0;
  int64_t timeUs = 0;  // since the Unix epoch
  std::shared_ptr<c10::GatheredContext> context;
  c10::MempoolId_t pool{0, 0};  // the block's private pool; {0, 0}: the default pools
};

struct Snapshot {
  std::vector<SegmentInfo> segments;              // every device's, by address
  std::vector<std::vector<TraceEntry>> traces;    // one per device, oldest first
};

// The segments and blocks of every device and the recorded traces; records
// a "snapshot" trace entry first while history is on. Thread-safe.
Snapshot snapshot();

}  // namespace c10_npu::NPUCachingAllocator
