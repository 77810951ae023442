// Task trace: every task an executor runs, written as Chrome trace JSON
// (loadable by Perfetto and chrome://tracing).
//
// Layout of the file: one process per device (pid = device ordinal, named
// "NPU <d>" by a ph:"M" process_name record), one thread lane per stream
// (tid = stream id, named "stream <id>" by a ph:"M" thread_name record), one
// ph:"X" complete event per task with its name, start and duration. args
// carry the enqueue time and the queueing delay, both in microseconds.
// Timestamps are microseconds since the trace started.
//
// The same records feed the activity log of npurt_activity.h (a profiler's
// device rows, activity.h): the trace file and the activity log are two
// independent modes of one recorder, so that the hot path tests one flag.
//
// Recording costs nothing when off: producers (at enqueue) and executors
// (per task) test enabled() (one relaxed load of the mode bits). When on,
// each record takes a mutex; tracing is a debugging aid, not the hot path.
//
// Thread safety: every member function is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "activity.h"
#include "npurt/npurt.h"

namespace npurt::internal {

// One finished task, as the executor reports it.
struct TraceRecord {
  int device;
  uint64_t stream;
  const char* name;    // copied by Trace::record
  npuActivityKind kind;
  uint32_t externalId;  // Note [Activity correlation] in npurt_activity.h
  uint64_t enqueueNs;   // 0 if tracing was off at enqueue
  uint64_t startNs;
  uint64_t endNs;
  bool failed;
};

class Trace {
 public:
  // True if either mode records. Hot path: one relaxed load.
  bool enabled() const noexcept { return modes_.load(std::memory_order_relaxed) != 0; }

  // The trace file: clears what was recorded and starts recording.
  void start();
  // Stops recording for the file; keeps the records.
  void stop() noexcept;
  // The activity log (npuActivityEnable / Disable).
  void startActivities();
  void stopActivities() noexcept;
  ActivityLog& activities() noexcept { return activities_; }
  // Appends one record to each mode that is on (dropped if the host is out
  // of memory).
  void record(const TraceRecord& record) noexcept;
  // Writes the JSON file. Returns npuSuccess, or npuErrorInvalidValue with
  // the thread's message set (via fail(), prefixed by `function`) if the file
  // cannot be written.
  npuError_t write(const char* path, const char* function) const;

 private:
  struct Entry {
    int device;
    uint64_t stream;
    std::string name;
    uint64_t enqueueNs;
    uint64_t startNs;
    uint64_t endNs;
    bool failed;
  };

  static constexpr uint8_t kFileMode = 1;
  static constexpr uint8_t kActivityMode = 2;
  // Bits of the modes that record; relaxed: records hang off their own
  // mutexes, the bits only say whether to take them.
  std::atomic<uint8_t> modes_{0};
  ActivityLog activities_;
  mutable std::mutex mutex_;  // guards entries_, originNs_
  std::vector<Entry> entries_;
  uint64_t originNs_ = 0;  // time of the last start()
};

}  // namespace npurt::internal
