// Storage aliases: a second npu storage over all of another's memory.
//
// Layer: framework core.
//
// Note [Storage aliases]
// ~~~~~~~~~~~~~~~~~~~~~~
// A compiled function replayed as an NPU graph hands its outputs out as
// tensors over the recording's output memory, and may replay the recording
// again only once the program dropped every one of them (Note [Compiled
// functions replayed as NPU graphs] in torch_npu/npu/_graph_runner.py). It
// tells by a weak reference to a storage that only those tensors share: an
// alias, a new StorageImpl over the same bytes. What makes an alias more than
// a second pointer:
//  - it holds a strong reference to its source, so the memory lives as long
//    as either (the recording and its pool may go first);
//  - it carries its source's poison (Note [Poisoned memory]): a replay whose
//    node failed marks the source, and reading the alias raises that error
//    instead of returning the previous replay's values; a task that writes
//    the whole alias clears the source's mark too (the same bytes).
// An alias is not resizable. The live aliases are kept in a registry, so any
// StorageImpl can be asked for its source without reading the object (which
// a task may name by a weak reference while another thread releases it);
// only poison lookups ask, and they run only while something is poisoned.
#pragma once

#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>

namespace c10_npu {

// An alias of `source`, an npu storage (Note [Storage aliases]). Raises
// c10::Error for a storage of another device type. Thread-safe.
c10::Storage makeStorageAlias(const c10::Storage& source);

// The storage `storage` aliases, or nullptr if it is not a live alias (or
// null). Valid while `storage` lives. Takes a lock. Thread-safe.
const c10::StorageImpl* aliasSource(const c10::StorageImpl* storage) noexcept;

}  // namespace c10_npu
