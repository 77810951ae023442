// The activity log of npurt_activity.h: the records a profiler drains
// (npuActivityFlush), and the threads' external correlation ids (Note
// [Activity correlation] in npurt_activity.h). Fed by Trace::record, which
// decides whether a task is recorded at all (trace.h).
//
// Thread safety: every member function is thread-safe; the correlation
// stack is per thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt_activity.h"

namespace npurt::internal {

struct TraceRecord;

class ActivityLog {
 public:
  // Appends one record (dropped if the host is out of memory).
  void append(const TraceRecord& record) noexcept;
  // Discards every record.
  void clear() noexcept;
  // Hands every record to `callback`, oldest first, and discards them. The
  // records are taken out under the lock; the callback runs without it.
  void flush(npuActivityCallback_t callback, void* userData);

  // The calling thread's innermost external correlation id, 0 if none.
  // Hot path while recording: one thread-local read.
  static uint32_t currentExternalId() noexcept;
  static void pushExternalId(uint32_t id);
  // False if the thread's stack is empty.
  static bool popExternalId(uint32_t* id) noexcept;

 private:
  struct Entry {
    npuActivityKind kind;
    int device;
    uint64_t stream;
    std::string name;
    uint32_t externalId;
    bool failed;
    uint64_t enqueueNs;
    uint64_t startNs;
    uint64_t endNs;
  };

  std::mutex mutex_;  // guards entries_
  std::vector<Entry> entries_;
};

}  // namespace npurt::internal
