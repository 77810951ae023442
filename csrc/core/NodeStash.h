// A few spare nodes of a node-based standard container, for reuse.
//
// Layer: framework core (used by the caching allocator's bookkeeping).
//
// Note [Allocator bookkeeping is recycled]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every allocation and free of the caching allocator moves blocks between
// node-based containers: a split adds a Block to the device's map of blocks
// and the remainder to its pool's set, the allocation enters the map of
// allocated pointers, and the free undoes all of it. With the containers'
// own allocations that was four mallocs and four frees per allocation and
// free (about 1,500 instructions of a tiny op's ~20K, and glibc's arena lock
// whenever its thread cache missed). So the nodes an erase takes out are
// kept in a stash and the next insert reuses one (C++17 node handles): the
// containers' contents and order are unchanged, only their memory is reused.
// A stash holds at most N nodes; beyond that, nodes are freed as before.
// Under AddressSanitizer nothing is kept, so that a stale Block pointer stays
// a reported use after free rather than a read of a recycled block.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#define NPU_NODE_STASH_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPU_NODE_STASH_BYPASS 1
#endif
#endif

namespace c10_npu {

// Spare nodes of containers of type Container (std::set, std::map,
// std::unordered_map, ...; any container of that type, since their node
// handles are interchangeable). Not thread-safe: guard it as the container.
template <typename Container, size_t N>
class NodeStash {
 public:
  using Node = typename Container::node_type;

  // Keeps `node` for reuse if there is room; otherwise it is destroyed here.
  void keep(Node&& node) noexcept {
#if defined(NPU_NODE_STASH_BYPASS)
    Node dropped = std::move(node);  // freed here: see the note
#else
    if (node.empty() || size_ == N) return;
    nodes_[size_++] = std::move(node);
#endif
  }

  // A kept node (its old key and value still in it), or an empty handle.
  Node take() noexcept { return size_ > 0 ? std::move(nodes_[--size_]) : Node(); }

  // Inserts `value` into the set `set`, in a kept node if there is one.
  // Returns whether it was inserted (false if an equal value was there: the
  // node is kept again).
  bool insertInto(Container& set, const typename Container::value_type& value) {
    Node node = take();
    if (node.empty()) return set.insert(value).second;
    node.value() = value;
    auto result = set.insert(std::move(node));
    if (!result.inserted) keep(std::move(result.node));
    return result.inserted;
  }

  // Inserts `key` -> `mapped` into the map `map`, in a kept node if there is
  // one. Returns whether it was inserted (false if the key was there: the
  // node is kept again).
  template <typename Mapped>
  bool insertInto(Container& map, const typename Container::key_type& key, Mapped&& mapped) {
    Node node = take();
    if (node.empty()) return map.emplace(key, std::forward<Mapped>(mapped)).second;
    node.key() = key;
    node.mapped() = std::forward<Mapped>(mapped);
    auto result = map.insert(std::move(node));
    if (!result.inserted) keep(std::move(result.node));
    return result.inserted;
  }

  // Erases `key` from `container`, keeping its node. Returns whether it was
  // there.
  template <typename Key>
  bool eraseFrom(Container& container, const Key& key) {
    Node node = container.extract(key);
    const bool found = !node.empty();
    keep(std::move(node));
    return found;
  }

 private:
  std::array<Node, N> nodes_{};
  size_t size_ = 0;
};

}  // namespace c10_npu
