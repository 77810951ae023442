// The access history of the race detector. See shadow_memory.h.
#include "shadow_memory.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace npurt::internal::racecheck {

std::optional<Conflict> ShadowMemory::check(const Access& access, const VectorClock& clock,
                                            const TaskRecord* self) const {
  // The first interval that may overlap: the one before begin, if it
  // reaches into the range, else the first at or after begin.
  auto it = segments_.upper_bound(access.begin);
  if (it != segments_.begin() && std::prev(it)->second.end > access.begin) --it;
  const auto conflict = [&](const AccessRecord& other, bool otherWrote,
                            uintptr_t segBegin, const Segment& seg) {
    return Conflict{other, otherWrote, std::max(segBegin, access.begin),
                    std::min(seg.end, access.end)};
  };
  for (; it != segments_.end() && it->first < access.end; ++it) {
    const Segment& seg = it->second;
    if (seg.write && seg.write->task.get() != self && !orderedAfter(clock, *seg.write->task)) {
      return conflict(*seg.write, true, it->first, seg);
    }
    if (!access.write) continue;
    for (const AccessRecord& read : seg.reads) {
      if (read.task.get() != self && !orderedAfter(clock, *read.task)) {
        return conflict(read, false, it->first, seg);
      }
    }
  }
  return std::nullopt;
}

void ShadowMemory::splitAt(uintptr_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first >= at || it->second.end <= at) return;  // no interval strictly contains it
  Segment right = it->second;  // same history on both sides
  it->second.end = at;
  segments_.emplace_hint(std::next(it), at, std::move(right));
}

void ShadowMemory::record(const Access& access, const TaskRecordPtr& task) {
  if (access.begin >= access.end) return;
  splitAt(access.begin);
  splitAt(access.end);
  const AccessRecord rec{task, access.begin, access.end};
  if (access.write) {
    // Every earlier access of the range is ordered before this write or was
    // reported: the write alone is the history from here on.
    segments_.erase(segments_.lower_bound(access.begin), segments_.lower_bound(access.end));
    segments_.emplace(access.begin, Segment{access.end, rec, {}});
    return;
  }
  uintptr_t at = access.begin;
  auto it = segments_.lower_bound(access.begin);
  while (at < access.end) {
    if (it == segments_.end() || it->first > at) {
      // A gap up to the next interval (or the end): a new interval.
      const uintptr_t gapEnd = it == segments_.end() ? access.end : std::min(it->first, access.end);
      it = std::next(segments_.emplace_hint(it, at, Segment{gapEnd, std::nullopt, {rec}}));
      at = gapEnd;
      continue;
    }
    Segment& seg = it->second;
    if (!seg.write || seg.write->task != task) {
      auto same = std::find_if(seg.reads.begin(), seg.reads.end(), [&](const AccessRecord& r) {
        return r.task->streamIndex == task->streamIndex;
      });
      if (same != seg.reads.end()) {
        *same = rec;
      } else {
        seg.reads.push_back(rec);
      }
    }
    at = seg.end;
    ++it;
  }
}

void ShadowMemory::reset(uintptr_t begin, uintptr_t end) {
  if (begin >= end) return;
  splitAt(begin);
  splitAt(end);
  segments_.erase(segments_.lower_bound(begin), segments_.lower_bound(end));
}

}  // namespace npurt::internal::racecheck
