// The runs of mapped memory in the memory manager's map of device memory:
// how npuMemMap and npuMemUnmap make mapped addresses valid (or invalid)
// device pointers. See memory.h and Note [Virtual memory] in
// csrc/npurt/README.md.
#include <iterator>
#include <mutex>
#include <utility>

#include "../memory.h"

namespace npurt::internal {

std::vector<std::shared_ptr<Allocation>> MemoryManager::addMapped(MappedPiece piece, int device,
                                                                  uint64_t reservationId) {
  std::vector<std::shared_ptr<Allocation>> replaced;
  std::vector<MappedPiece> run;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const uintptr_t end = piece.begin + piece.size;
  // The run that ends where the piece begins, if it is of the same reservation.
  auto after = device_.lower_bound(piece.begin);
  auto leftIt = device_.end();
  if (after != device_.begin()) {
    const auto before = std::prev(after);
    const Allocation& left = *before->second;
    if (left.reservation == reservationId && before->first + left.size == piece.begin) {
      run = left.pieces;
      leftIt = before;
    }
  }
  run.push_back(std::move(piece));
  // The run that starts where the piece ends.
  auto rightIt = device_.end();
  if (after != device_.end() && after->first == end && after->second->reservation == reservationId) {
    run.insert(run.end(), after->second->pieces.begin(), after->second->pieces.end());
    rightIt = after;
  }
  auto merged = std::make_shared<Allocation>(device, reservationId, std::move(run));
  // Strong guarantee: the only step that may throw (a new map node) comes
  // first; the merged run takes the left run's node when there is one.
  if (leftIt == device_.end()) {
    leftIt = device_.emplace(reinterpret_cast<uintptr_t>(merged->base), nullptr).first;
  } else {
    replaced.push_back(std::move(leftIt->second));
  }
  leftIt->second = std::move(merged);
  if (rightIt != device_.end()) {
    replaced.push_back(std::move(rightIt->second));
    device_.erase(rightIt);
  }
  return replaced;
}

std::vector<std::shared_ptr<Allocation>> MemoryManager::removeMapped(uintptr_t begin, size_t size) {
  std::vector<std::shared_ptr<Allocation>> replaced;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = device_.upper_bound(begin);
  if (it == device_.begin()) return replaced;  // the caller checked: cannot happen
  --it;
  const std::shared_ptr<Allocation> run = it->second;
  if (!run->mapped() || !run->contains(reinterpret_cast<const void*>(begin), size)) return replaced;
  const uintptr_t end = begin + size;
  std::vector<MappedPiece> left;
  std::vector<MappedPiece> right;
  for (const MappedPiece& p : run->pieces) {
    if (p.begin + p.size <= begin) left.push_back(p);
    if (p.begin >= end) right.push_back(p);
  }
  // As in addMapped: everything that may throw first, then the new node;
  // the left part keeps the run's node.
  std::shared_ptr<Allocation> leftRun;
  std::shared_ptr<Allocation> rightRun;
  if (!left.empty()) {
    leftRun = std::make_shared<Allocation>(run->device, run->reservation, std::move(left));
  }
  if (!right.empty()) {
    rightRun = std::make_shared<Allocation>(run->device, run->reservation, std::move(right));
    device_.emplace(end, std::move(rightRun));
  }
  if (leftRun != nullptr) {
    it->second = std::move(leftRun);
  } else {
    device_.erase(it);
  }
  replaced.push_back(run);
  return replaced;
}

}  // namespace npurt::internal
