// Poisoned device memory: the record of npu storages whose producing work did
// not run, so that reading them raises the original error instead of
// returning whatever the memory held.
//
// Layer: framework core.
//
// Note [Poisoned memory]
// ~~~~~~~~~~~~~~~~~~~~~~
// When a task fails, npurt discards the tasks queued behind it on its stream
// until the failure is reported (Note [Task failure rule] in
// csrc/npurt/README.md). The outputs of the failed task and of every
// discarded one hold no valid data. Each op task therefore knows the storages
// it reads and writes (TaskAccess in csrc/aten/OpLauncher.h), and:
//  - a task that failed or was discarded marks the storages it writes as
//    poisoned with the failure's message (on the executor, in stream order,
//    before any later task of that stream runs);
//  - a task that reads a poisoned storage does not run its kernel: it
//    poisons what it writes with the same message (the poison spreads along
//    the data, not along the stream), and fails only if it writes host
//    memory, which cannot carry the mark;
//  - host reads (item(), .cpu(), printing) raise the message of a poisoned
//    storage, every time (sticky);
//  - a successful task that wrote a whole storage clears its mark.
// Marks belong to storages (StorageImpl), not to memory blocks, and live in
// stream order: a storage the program dropped may still be written and read
// by tasks queued before the drop (Note [Task captures and memory reuse] in
// csrc/aten/OpTask.cpp), so its mark must outlive it, while the block
// behind it may already back a new tensor, which must not inherit the mark.
// Tasks hold weak references to the storages they access, so a storage's
// address is never reused while a task or a mark may still name it; a mark is
// dropped once its storage is gone and no task refers to it any more.
//
// Cost when nothing is poisoned: one relaxed atomic load per check.
#pragma once

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <memory>
#include <string>

namespace c10_npu::poison {

using Message = std::shared_ptr<const std::string>;
using StorageRef = c10::weak_intrusive_ptr<c10::StorageImpl>;

namespace detail {
extern std::atomic<size_t> gPoisonedCount;
}

// True if any storage is poisoned. One relaxed load: callers skip every
// other call of this file when it is false. Thread-safe.
inline bool any() noexcept {
  return detail::gPoisonedCount.load(std::memory_order_relaxed) != 0;
}

// The poison message of `storage`, or nullptr; an alias without a mark of
// its own has its source's (Note [Storage aliases]). Thread-safe.
Message find(const c10::StorageImpl* storage) noexcept;

// Poisons `storage` with `message`; keeps an existing mark (the first
// failure is the cause). Thread-safe; never throws (an allocation failure
// leaves the mark unset).
void mark(const StorageRef& storage, const Message& message) noexcept;

// Removes the mark of `storage`, if any, and of its source if it is an
// alias (the same bytes). Thread-safe.
void clear(const c10::StorageImpl* storage) noexcept;

// The text a read of poisoned memory raises: says that the tensor holds no
// valid data and why (the original failure). Thread-safe.
std::string describe(const Message& message);

// Raises the poison of `storage`, if any, as a c10::Error naming `what` (the
// read being made). Thread-safe.
void raiseIfPoisoned(const c10::StorageImpl* storage, const char* what);

}  // namespace c10_npu::poison
