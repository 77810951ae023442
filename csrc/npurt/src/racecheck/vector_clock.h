// VectorClock: one logical clock per stream, for the race detector's
// happens-before order (Note [Happens-before model] in racecheck.h).
//
// Entry i is how many tasks of the stream with race index i are known to
// have finished (an epoch); a missing entry is 0. Task epochs start at 1, so
// "nothing known" orders nothing.
//
// Thread safety: none; the checker guards every clock with its mutex.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace npurt::internal::racecheck {

class VectorClock {
 public:
  uint64_t get(uint32_t index) const noexcept {
    return index < entries_.size() ? entries_[index] : 0;
  }
  void set(uint32_t index, uint64_t value) {
    if (index >= entries_.size()) entries_.resize(static_cast<size_t>(index) + 1, 0);
    entries_[index] = value;
  }
  // this = max(this, other) entry-wise. Returns true if anything grew.
  bool join(const VectorClock& other) {
    bool grew = false;
    if (other.entries_.size() > entries_.size()) entries_.resize(other.entries_.size(), 0);
    for (size_t i = 0; i < other.entries_.size(); ++i) {
      if (other.entries_[i] > entries_[i]) {
        entries_[i] = other.entries_[i];
        grew = true;
      }
    }
    return grew;
  }
  // True if every entry of `other` is <= ours (we know all it knows).
  bool covers(const VectorClock& other) const noexcept {
    for (size_t i = 0; i < other.entries_.size(); ++i) {
      if (other.entries_[i] > get(static_cast<uint32_t>(i))) return false;
    }
    return true;
  }

 private:
  std::vector<uint64_t> entries_;
};

}  // namespace npurt::internal::racecheck
