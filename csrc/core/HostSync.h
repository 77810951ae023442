// Host syncs of the op path: the sync-debug mode and the count of syncs per op.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace c10_npu {

// Note [Host syncs of the op path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Work on a stream runs later; the host only waits when an op cannot go on
// without the device's data: a host read (item(), a blocking copy to the
// host, printing) and an op whose outputs depend on the data (nonzero,
// unique, masked_select, ... : the synchronous op path, Note [The synchronous
// op path]). Such a wait stalls the host and empties the device's pipeline,
// so users need to see it. Every such site calls noteHostSync with the op's
// name *before* it queues anything, so that:
//  - each sync is counted, per op (hostSyncStats), whatever the mode;
//  - in "warn" mode it warns, and in "error" mode it raises torch_npu's
//    "called a synchronizing NPU operation" before the op has touched the
//    stream (the stream, the allocator and the op's inputs are unchanged).
// Explicit synchronizes (torch.npu.synchronize(), Stream.synchronize(),
// Event.synchronize()) are what the user asked for and are not reported, as
// with CUDA's sync-debug mode.

enum class SyncDebugMode : int8_t { kDisabled = 0, kWarn = 1, kError = 2 };

// The process-wide mode (torch_npu.npu.set_sync_debug_mode). Thread-safe.
void setSyncDebugMode(SyncDebugMode mode) noexcept;
SyncDebugMode syncDebugMode() noexcept;

// Counts a host sync of op `op` and applies the mode: warns (kWarn) or raises
// c10::Error (kError). Thread-safe.
void noteHostSync(const char* op);

// Host syncs counted since the start or the last reset: the total, and per
// op name in first-seen order. Thread-safe.
struct HostSyncStats {
  uint64_t total = 0;
  std::vector<std::pair<std::string, uint64_t>> byOp;
};
HostSyncStats hostSyncStats();
void resetHostSyncStats() noexcept;

}  // namespace c10_npu
