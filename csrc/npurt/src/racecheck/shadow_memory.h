// ShadowMemory: the race detector's access history of device memory, and the
// check of a new access against it (Note [Happens-before model] in
// racecheck.h).
//
// The history is a map of disjoint byte intervals. Each holds the last task
// that wrote it and the tasks that read it since, at most one per stream
// (the latest: a later task of a stream is ordered after the earlier ones,
// so whatever is ordered after it is ordered after them too). A write
// replaces every interval it covers with one, so memory written whole stays
// one interval however often it is written.
//
// Thread safety: none; the checker guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vector_clock.h"

namespace npurt::internal::racecheck {

// A byte range [begin, end) that a task reads and/or writes.
struct Access {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool read = false;
  bool write = false;
};
using AccessList = std::vector<Access>;

// A task as the history remembers it (for ordering and for reports).
struct TaskRecord {
  std::string name;
  uint64_t streamId = 0;
  int device = 0;
  uint32_t streamIndex = 0;  // its stream's entry in vector clocks
  uint64_t epoch = 0;        // its position in its stream (>= 1)
};
using TaskRecordPtr = std::shared_ptr<const TaskRecord>;

// One task's access to an interval, with the range the task declared.
struct AccessRecord {
  TaskRecordPtr task;
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

// A previous access that the new one is not ordered after.
struct Conflict {
  AccessRecord other;
  bool otherWrote = false;
  uintptr_t begin = 0;  // the overlap
  uintptr_t end = 0;
};

class ShadowMemory {
 public:
  // The first access in the history that overlaps `access` and conflicts
  // with it (one of the two writes) and that `clock` (the new task's) is
  // not ordered after. Accesses of `self` never conflict.
  std::optional<Conflict> check(const Access& access, const VectorClock& clock,
                                const TaskRecord* self) const;
  // Records `access` by `task`. Record a task's writes before its reads.
  void record(const Access& access, const TaskRecordPtr& task);
  // Forgets [begin, end).
  void reset(uintptr_t begin, uintptr_t end);
  void clear() noexcept { segments_.clear(); }
  size_t intervals() const noexcept { return segments_.size(); }

 private:
  struct Segment {
    uintptr_t end = 0;
    std::optional<AccessRecord> write;
    std::vector<AccessRecord> reads;
  };
  using Map = std::map<uintptr_t, Segment>;

  // Splits the interval that strictly contains `at`, if any, at `at`.
  void splitAt(uintptr_t at);

  Map segments_;  // by begin; disjoint
};

// True if a task whose clock is `clock` is ordered after `task`.
inline bool orderedAfter(const VectorClock& clock, const TaskRecord& task) noexcept {
  return clock.get(task.streamIndex) > task.epoch;
}

}  // namespace npurt::internal::racecheck
