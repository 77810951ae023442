// The activity log and the external correlation ids; see activity.h.
#include "activity.h"

#include <utility>

#include "trace.h"

namespace npurt::internal {
namespace {

// The calling thread's pushed ids, innermost last. The innermost is cached
// in a plain thread-local so that an enqueue while recording reads one word.
thread_local std::vector<uint32_t> tlsExternalIds;
thread_local uint32_t tlsCurrentExternalId = 0;

}  // namespace

void ActivityLog::append(const TraceRecord& record) noexcept {
  try {
    Entry entry{record.kind,       record.device,  record.stream,
                record.name,       record.externalId, record.failed,
                record.enqueueNs,  record.startNs, record.endNs};
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
  } catch (...) {
    // Out of memory: losing an activity record is better than losing the task.
  }
}

void ActivityLog::clear() noexcept {
  std::vector<Entry> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  dropped.swap(entries_);
}

void ActivityLog::flush(npuActivityCallback_t callback, void* userData) {
  std::vector<Entry> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(entries_);
  }
  for (const Entry& e : taken) {
    const npuActivityRecord record{e.kind,    e.device,           e.stream,
                                   e.name.c_str(), e.externalId, e.failed ? 1 : 0,
                                   e.enqueueNs, e.startNs,        e.endNs};
    callback(&record, userData);
  }
}

uint32_t ActivityLog::currentExternalId() noexcept { return tlsCurrentExternalId; }

void ActivityLog::pushExternalId(uint32_t id) {
  tlsExternalIds.push_back(id);
  tlsCurrentExternalId = id;
}

bool ActivityLog::popExternalId(uint32_t* id) noexcept {
  if (tlsExternalIds.empty()) return false;
  if (id != nullptr) *id = tlsExternalIds.back();
  tlsExternalIds.pop_back();
  tlsCurrentExternalId = tlsExternalIds.empty() ? 0 : tlsExternalIds.back();
  return true;
}

}  // namespace npurt::internal
