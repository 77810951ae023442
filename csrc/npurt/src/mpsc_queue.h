// Intrusive multi-producer single-consumer FIFO (Dmitry Vyukov's design).
//
// Hot path. push() is wait-free: one exchange plus one store. pop() is
// lock-free for the single consumer. Nodes are owned by the caller; the queue
// only links them.
//
// The one subtlety: a producer is between its exchange of head_ and its store
// into the predecessor's `next` for a few instructions. A consumer arriving
// in that window sees the queue end early and pop() returns nullptr even
// though a node was already counted as enqueued. Callers that know a node
// must be there (the stream's pending count says so) retry; see
// Note [Pending count] in stream.h.
//
// Thread safety: push() from any number of threads at once; pop() from one
// thread at a time (the stream's current owner; ownership is handed over with
// acquire/release through the stream's pending count and the executor's
// mutex, so successive owners see each other's tail_).
#pragma once

#include <atomic>
#include <cstdint>

namespace npurt::internal {

struct MpscNode {
  std::atomic<MpscNode*> next{nullptr};
};

class MpscQueue {
 public:
  MpscQueue() noexcept : head_(&stub_), tail_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Appends `node`. Thread-safe for any number of producers.
  void push(MpscNode* node) noexcept {
    node->next.store(nullptr, std::memory_order_relaxed);
    // acq_rel: release publishes the node's contents (written before push) to
    // the consumer that reaches it through prev->next; acquire orders this
    // producer after the previous producer's exchange.
    MpscNode* prev = head_.exchange(node, std::memory_order_acq_rel);
    // release: the consumer's acquire load of `next` sees a complete node.
    prev->next.store(node, std::memory_order_release);
  }

  // A word for the queue's user that lives on the producers' cache line:
  // a producer that updates it next to push() touches one line, not two.
  // The queue itself never reads it. (The stream keeps its pending count
  // here; see Note [Pending count] in stream.h.)
  std::atomic<uint64_t>& counter() noexcept { return counter_; }
  const std::atomic<uint64_t>& counter() const noexcept { return counter_; }

  // Removes and returns the oldest node, or nullptr if the queue is empty or
  // a push is half-way through (see the file comment). Single consumer only.
  MpscNode* pop() noexcept {
    MpscNode* tail = tail_;
    MpscNode* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    // `tail` is the last linked node. If it is not the newest node either, a
    // producer is between exchange and link: report "empty for now".
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    // Re-insert the stub behind `tail` so that `tail` gets a successor and
    // can be handed out without ever being touched by a producer again.
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

 private:
  // Producers hammer head_; the consumer owns tail_. Separate cache lines so
  // that the consumer's writes do not steal the producers' line.
  alignas(64) std::atomic<MpscNode*> head_;  // newest node (producers)
  std::atomic<uint64_t> counter_{0};         // see counter()
  alignas(64) MpscNode* tail_;               // oldest node not yet popped (consumer)
  MpscNode stub_;                            // keeps the list non-empty
};

}  // namespace npurt::internal
