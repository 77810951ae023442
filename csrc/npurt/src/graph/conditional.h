// Conditional nodes: an "if" node of a graph, whose body is a graph of its
// own that runs at a launch only when a byte of device memory is non-zero.
// See Note [Conditional nodes] in csrc/npurt/README.md.
//
// Thread safety: a ConditionalWork's body is set once, under the capture
// registry's mutex, before the graph holding the node is built; after that
// it is immutable and run() is called as any node work's (node_work.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../stream.h"
#include "graph.h"
#include "node_work.h"

namespace npurt::internal {

struct Allocation;

class ConditionalWork final : public NodeWork {
 public:
  // `condition`: the byte the node reads, inside `alloc` (kept alive).
  ConditionalWork(const void* condition, std::shared_ptr<Allocation> alloc) noexcept
      : condition_(static_cast<const unsigned char*>(condition)), alloc_(std::move(alloc)) {}

  NodeKind kind() const noexcept override { return NodeKind::kConditional; }
  const char* name() const noexcept override { return "if"; }
  std::string describe() const override;
  // Reads the condition; when it is non-zero runs the body's nodes in
  // capture order (a topological order), stopping at the first failure,
  // whose node name leads the message.
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  // The condition's read and every access of the body (as if it ran).
  void appendAccesses(std::vector<racecheck::Access>& out) const override;

  void setBody(std::vector<GraphNode> body) noexcept { body_ = std::move(body); }
  const std::vector<GraphNode>& body() const noexcept { return body_; }

 private:
  const unsigned char* condition_;
  std::shared_ptr<Allocation> alloc_;  // Note [Memory lifetime]
  std::vector<GraphNode> body_;
};

// npuStreamBeginCaptureToIf: adds an if node reading `condition` (checked
// device memory inside `alloc`) to the capture `stream` records into, and
// makes `body` capture the node's body.
npuError_t beginCaptureToIf(Stream& stream, const void* condition,
                            std::shared_ptr<Allocation> alloc, Stream& body, const char* fn);
// npuStreamEndCaptureToIf: ends the body capture begun on `body` and gives
// the node its body.
npuError_t endCaptureToIf(Stream& body, const char* fn);

}  // namespace npurt::internal
