// See HostSync.h and Note [Host syncs of the op path].
#include "core/HostSync.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>

#include "core/NPUException.h"
#include "core/NPUStream.h"
#include "core/graphs/CaptureRegistry.h"

namespace c10_npu {
namespace {

std::atomic<SyncDebugMode> gMode{SyncDebugMode::kDisabled};

struct Counts {
  std::mutex mutex;
  HostSyncStats stats;
};

Counts& counts() {
  static Counts* c = new Counts();  // leaked: ops may run during static destruction
  return *c;
}

void count(const char* op) {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.stats.total;
  for (auto& [name, n] : c.stats.byOp) {
    if (name == op) {
      ++n;
      return;
    }
  }
  c.stats.byOp.emplace_back(op, 1);
}

}  // namespace

void setSyncDebugMode(SyncDebugMode mode) noexcept { gMode.store(mode, std::memory_order_relaxed); }

SyncDebugMode syncDebugMode() noexcept { return gMode.load(std::memory_order_relaxed); }

void noteHostSync(const char* op) {
  // Note [Host syncs during graph capture]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The work a capture records runs only at replays, so a host read of it
  // would wait forever or read stale memory. Raise before the op queued
  // anything: the capture and the stream stay usable (CUDA invalidates the
  // capture instead; a runtime-level synchronize does that here too).
  if (graphs::anyCapture() && graphs::isCapturing(getCurrentNPUStream())) {
    TORCH_CHECK(false, op,
                " synchronizes the host with the device, which is not permitted while the "
                "current NPU stream is capturing a graph (operation not permitted when stream "
                "is capturing). Move host reads (.item(), .cpu(), printing, data-dependent "
                "shapes) out of the captured region.",
                NPU_ERROR_SUFFIX);
  }
  count(op);
  switch (syncDebugMode()) {
    case SyncDebugMode::kDisabled:
      return;
    case SyncDebugMode::kWarn:
      TORCH_WARN("called a synchronizing NPU operation: ", op,
                 " (torch_npu.npu.set_sync_debug_mode(\"default\") turns this warning off)");
      return;
    case SyncDebugMode::kError:
      TORCH_CHECK(false, "called a synchronizing NPU operation: ", op,
                  " (sync debug mode is \"error\"; the op did not run)", NPU_ERROR_SUFFIX);
  }
}

HostSyncStats hostSyncStats() {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void resetHostSyncStats() noexcept {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.total = 0;
  c.stats.byOp.clear();
}

}  // namespace c10_npu
