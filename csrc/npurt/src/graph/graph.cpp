// Graph: the DOT dump. See graph.h.
#include "graph.h"

#include <string>

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

}  // namespace

std::string Graph::dot() const {
  std::string out = "digraph npuGraph_capture" + std::to_string(captureId_) + " {\n";
  out += "  label=\"capture " + std::to_string(captureId_) + ", device " + std::to_string(device_) +
         ", " + std::to_string(nodes_.size()) + " nodes\";\n  node [shape=box];\n";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeWork& work = *nodes_[i].work;
    // Lines of the label joined by DOT's "\n" escape.
    std::string label =
        std::to_string(i) + " " + nodeKindName(work.kind()) + "\\n" + escaped(work.name());
    if (const std::string detail = work.describe(); !detail.empty()) {
      label += "\\n" + escaped(detail);
    }
    out += "  n" + std::to_string(i) + " [label=\"" + label + "\"" +
           (work.kind() == NodeKind::kFused ? ", style=bold" : "") + "];\n";
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const uint32_t dep : nodes_[i].deps) {
      out += "  n" + std::to_string(dep) + " -> n" + std::to_string(i) + ";\n";
    }
  }
  out += "}\n";
  return out;
}

}  // namespace npurt::internal
