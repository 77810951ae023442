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
// Recording costs nothing when off: executors test enabled() (one relaxed
// load) per task. When on, each record takes a mutex; tracing is a debugging
// aid, not the hot path.
//
// Thread safety: every member function is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace npurt::internal {

// One finished task, as the executor reports it.
struct TraceRecord {
  int device;
  uint64_t stream;
  const char* name;    // copied by Trace::record
  uint64_t enqueueNs;  // 0 if tracing was off at enqueue
  uint64_t startNs;
  uint64_t endNs;
  bool failed;
};

class Trace {
 public:
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }

  // Clears what was recorded and starts recording.
  void start();
  // Stops recording; keeps the records.
  void stop() noexcept;
  // Appends one record (dropped if the host is out of memory).
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

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;  // guards entries_, originNs_
  std::vector<Entry> entries_;
  uint64_t originNs_ = 0;  // time of the last start()
};

}  // namespace npurt::internal
