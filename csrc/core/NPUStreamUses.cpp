// Which streams other than its own use a block: Tensor.record_stream, queued
// tasks of other streams, erase_stream, and external streams destroyed while
// blocks list them. The free path (NPUCachingAllocator.cpp) records an event
// on each such stream; the Notes on lock ordering are there too.
//
// Note [Allocator events on external streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// For managed streams the free path records an NPUEvent through the task
// queue (NPUEvent::record), which orders it after the work already queued
// without blocking. External streams cannot take that path: in compat mode
// NPUEvent::record and the queue's record task refuse them, and the event
// must in any case be recorded while the stream still exists. So for them the
// allocator drains the stream's queue (no lock held: see Note [Allocator lock
// ordering]) and then records a runtime event directly with npuEventRecord on
// the raw handle resolved at recordStream time, under the device mutex and
// only if the use is still listed. The destroy callback removes every use of
// a dying stream under the same mutexes (after recording its own event on
// it), and recordStream refuses handles that callback has seen, so a raw
// record never reaches a destroyed stream.
//
// Note [Tasks on other streams record their use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An op queued on stream S that uses a block allocated on stream A captures
// the block as a CPU alias (Note [Task captures and memory reuse] in
// csrc/aten/OpTask.cpp) after aliasableByTask recorded S's use of the block,
// as record_stream would. When the program drops the tensor, the free records
// an event on S behind the task (or none if S finished all its work, Note
// [Frees need no event on finished streams] in NPUCachingAllocator.cpp), so the block is not reused
// before the task ran. The use differs from record_stream's in what sees it:
// the trace hooks do not (the stream sanitizer must still report the
// missing record_stream at that free, where hardware would race), and
// erase_stream does not remove it (StreamUse::byTask). Holding the tensor by
// reference instead, as tasks did before, kept the free itself back until
// the task was released, so the sanitizer saw it late or not at all.
// External and capturing streams keep the by-reference capture: an event on
// a capturing stream would become part of the graph, and an external stream
// needs the direct-record path of Note [Allocator events on external
// streams], which a use without a handle does not take.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>

#include "core/NPUCachingAllocator.h"
#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu::NPUCachingAllocator::detail {

void DeviceState::recordStream(Block* block, const NPUStream& stream) {
  npuStream_t external = nullptr;
  if (stream.isExternal()) {
    allocator().subscribeOnce();
    external = stream.rawHandle();  // raises if the stream was destroyed
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream.device_index() == device_ && stream.id() == block->stream) return;
  TORCH_CHECK(external == nullptr || deadExternal_.count(external) == 0, "External NPU stream ",
              stream, " was destroyed by the library that created it and cannot be used any more.",
              NPU_ERROR_SUFFIX);
  for (const StreamUse& use : block->uses) {
    if (use.stream == stream) return;
  }
  block->uses.push_back(StreamUse{stream, external});
}

void DeviceState::recordTaskUse(Block* block, const NPUStream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StreamUse& use : block->uses) {
    if (use.stream == stream) {
      use.byTask = true;
      return;
    }
  }
  block->uses.push_back(StreamUse{stream, nullptr, /*byTask=*/true});
}

void DeviceState::eraseStream(Block* block, const NPUStream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& uses = block->uses;
  // A queued task's use stays: the task may not have run yet.
  uses.erase(std::remove_if(uses.begin(), uses.end(),
                            [&](const StreamUse& u) { return u.stream == stream && !u.byTask; }),
             uses.end());
}

std::optional<NPUStream> DeviceState::markStreamDead(npuStream_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  deadExternal_.insert(handle);
  for (const auto& [ptr, block] : blocks_) {
    for (const StreamUse& use : block->uses) {
      if (use.externalHandle == handle) return use.stream;
    }
  }
  return std::nullopt;
}

void DeviceState::replaceUses(npuStream_t handle, const std::shared_ptr<RawEvent>& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [ptr, block] : blocks_) {
    auto& uses = block->uses;
    auto it = std::remove_if(uses.begin(), uses.end(),
                             [&](const StreamUse& u) { return u.externalHandle == handle; });
    if (it == uses.end()) continue;
    uses.erase(it, uses.end());
    if (event != nullptr) block->rawEvents.push_back(event);
  }
}

// ---------------------------------------------------------------------------
// Stream-destroy notification
// ---------------------------------------------------------------------------

void CachingAllocator::onStreamDestroyed(npuStream_t handle, int /*device*/, void* userData) {
  // Runs on the destroying thread, before npurt invalidates the handle: the
  // stream still accepts an event record. Never throws across the C API.
  try {
    auto& self = *static_cast<CachingAllocator*>(userData);
    // Blocks of any device may list a stream of this device: visit all.
    // After markStreamDead, recordStream refuses the handle, so the uses
    // found below are all there will be.
    std::optional<NPUStream> stream;
    for (const auto& state : self.devices_) {
      auto found = state->markStreamDead(handle);
      if (!stream.has_value()) stream = found;
    }
    if (!stream.has_value()) return;
    // No lock held: see Note [Allocator lock ordering]. Waits without
    // reporting (a failure belongs to the stream's own synchronize).
    queue::waitSubmitted(*stream);
    std::shared_ptr<RawEvent> event;
    try {
      event = RawEvent::recordOn(handle);
    } catch (const c10::Error&) {
      // No event: wait for the stream now, so the blocks need none. The
      // stream is going away, so no later synchronize could report its
      // failure either.
      (void)npuStreamSynchronize(handle);
    }
    for (const auto& state : self.devices_) state->replaceUses(handle, event);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "NPU caching allocator: stream destroy notification failed: %s\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "NPU caching allocator: stream destroy notification failed\n");
  }
}
}  // namespace c10_npu::NPUCachingAllocator::detail
