// Graph: the DOT dump. See graph.h.
#include "graph.h"

#include <string>
#include <vector>

#include "conditional.h"

namespace npurt::internal {
namespace {

// Text for inside a DOT string literal: quotes and backslashes escaped.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Boxes and arrows of `nodes`, named `<prefix><index>`; an if node's body
// follows as a cluster of its own, entered by dashed arrows.
void appendNodes(std::string& out, const std::vector<GraphNode>& nodes, const std::string& prefix,
                 const std::string& indent) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeWork& work = *nodes[i].work;
    const std::string id = prefix + std::to_string(i);
    // Lines of the label joined by DOT's "\n" escape.
    // The name is left out when it only repeats the kind (an if node).
    std::string label = std::to_string(i) + " " + nodeKindName(work.kind());
    if (std::string(work.name()) != nodeKindName(work.kind()))
      label += "\\n" + escaped(work.name());
    if (const std::string detail = work.describe(); !detail.empty()) {
      label += "\\n" + escaped(detail);
    }
    const bool conditional = work.kind() == NodeKind::kConditional;
    out += indent + id + " [label=\"" + label + "\"" +
           (work.kind() == NodeKind::kFused ? ", style=bold" : "") +
           (conditional ? ", shape=diamond" : "") + "];\n";
    if (!conditional) continue;
    const auto& body = static_cast<const ConditionalWork&>(work).body();
    out +=
        indent + "subgraph cluster_" + id + " {\n" + indent + "  label=\"body of " + id + "\";\n";
    appendNodes(out, body, id + "_", indent + "  ");
    out += indent + "}\n";
    for (size_t b = 0; b < body.size(); ++b) {
      if (body[b].deps.empty()) {
        out += indent + id + " -> " + id + "_" + std::to_string(b) + " [style=dashed];\n";
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const uint32_t dep : nodes[i].deps) {
      out += indent + prefix + std::to_string(dep) + " -> " + prefix + std::to_string(i) + ";\n";
    }
  }
}

}  // namespace

std::string Graph::dot() const {
  std::string out = "digraph npuGraph_capture" + std::to_string(captureId_) + " {\n";
  out += "  label=\"capture " + std::to_string(captureId_) + ", device " + std::to_string(device_) +
         ", " + std::to_string(nodes_.size()) + " nodes\";\n  node [shape=box];\n";
  appendNodes(out, nodes_, "n", "  ");
  out += "}\n";
  return out;
}

}  // namespace npurt::internal
