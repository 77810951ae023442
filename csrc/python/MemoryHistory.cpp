// torch_npu._C: memory history and snapshots (torch_npu.npu.memory.
// _record_memory_history, _snapshot), in the dictionaries CUDA's
// torch._C._cuda_record_memory_history / _cuda_memorySnapshot produce, so
// that torch/cuda/_memory_viz.py and pytorch.org/memory_viz read them. See
// Note [Memory history] in csrc/core/NPUMemoryHistory.h.
//
// Layer: binding (the stacks are torch::CapturedTraceback objects, which only
// this layer may name). Thread-safe, as the allocator is.
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/NPUException.h"
#include "core/NPUMemoryHistory.h"

namespace py = pybind11;

// torch/csrc/profiler/python/combined_traceback.h declares these, but it
// includes nlohmann/json.hpp, which torch's wheel does not ship; these are
// its declarations of the two functions (exported by libtorch_python).
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(
    std::vector<CapturedTraceback*>& to_symbolize);
TORCH_PYTHON_API void installCapturedTracebackPython();
}  // namespace torch

namespace c10_npu::python {
namespace {

namespace alloc = NPUCachingAllocator;

std::shared_ptr<c10::GatheredContext> gatherPython() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gatherAll() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

// CUDA's argument rules: enabled None/"state"/"all", context None/"state"/
// "alloc"/"all", stacks "python"/"all".
void recordMemoryHistory(const std::optional<std::string>& enabled,
                         const std::optional<std::string>& context, const std::string& stacks,
                         size_t maxEntries, bool clearHistory) {
  TORCH_CHECK_VALUE(!enabled || *enabled == "state" || *enabled == "all",
                    "_record_memory_history: enabled must be None, 'state' or 'all', got '",
                    enabled.value_or(""), "'");
  TORCH_CHECK_VALUE(!context || *context == "state" || *context == "alloc" || *context == "all",
                    "_record_memory_history: context must be None, 'state', 'alloc' or 'all', "
                    "got '", context.value_or(""), "'");
  TORCH_CHECK_VALUE(stacks == "python" || stacks == "all",
                    "_record_memory_history: stacks must be 'python' or 'all', got '", stacks,
                    "'");
  TORCH_CHECK_VALUE(!enabled || maxEntries > 0,
                    "_record_memory_history: max_entries must be positive, got ", maxEntries);
  static const bool installed = [] {
    torch::installCapturedTracebackPython();
    return true;
  }();
  (void)installed;
  alloc::RecordContext when = alloc::RecordContext::kNever;
  if (context == "state") when = alloc::RecordContext::kState;
  if (context == "alloc") when = alloc::RecordContext::kAlloc;
  if (context == "all") when = alloc::RecordContext::kAll;
  alloc::recordHistory(enabled.has_value(), stacks == "all" ? &gatherAll : &gatherPython,
                       maxEntries, when, enabled == "all", clearHistory);
}

// Symbolizes every stack of the snapshot in one batch (as CUDA's binding
// does: frames shared by many stacks are resolved once).
class Frames {
 public:
  void add(const std::shared_ptr<c10::GatheredContext>& context) {
    if (context == nullptr || index_.count(context.get()) != 0) return;
    index_.emplace(context.get(), tracebacks_.size());
    tracebacks_.push_back(torch::getCapturedTracebackFromContext(context));
  }
  void symbolize() { symbolized_ = torch::py_symbolize(tracebacks_); }
  py::object of(const std::shared_ptr<c10::GatheredContext>& context) const {
    if (context == nullptr) return py::list();
    return symbolized_.at(index_.at(context.get()));
  }

 private:
  std::unordered_map<const c10::GatheredContext*, size_t> index_;
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::object> symbolized_;
};

py::dict memorySnapshot() {
  alloc::Snapshot snap;
  {
    py::gil_scoped_release release;  // the allocator's locks; stacks are not gathered here
    snap = alloc::snapshot();
  }
  Frames frames;
  for (const auto& seg : snap.segments) {
    frames.add(seg.context);
    for (const auto& block : seg.blocks) frames.add(block.context);
  }
  for (const auto& trace : snap.traces) {
    for (const auto& entry : trace) frames.add(entry.context);
  }
  frames.symbolize();

  py::list segments;
  for (const auto& seg : snap.segments) {
    py::dict s;
    s["device"] = seg.device;
    s["address"] = seg.address;
    s["total_size"] = seg.totalSize;
    s["allocated_size"] = seg.allocatedSize;
    s["active_size"] = seg.activeSize;
    s["requested_size"] = seg.requestedSize;
    s["stream"] = seg.stream;
    s["segment_type"] = seg.isLarge ? "large" : "small";
    s["segment_pool_id"] = py::make_tuple(seg.pool.first, seg.pool.second);
    s["is_expandable"] = seg.isExpandable;
    s["frames"] = frames.of(seg.context);
    py::list blocks;
    for (const auto& block : seg.blocks) {
      py::dict b;
      b["address"] = block.address;
      b["size"] = block.size;
      b["requested_size"] = block.requested;
      b["state"] = block.state;
      b["frames"] = frames.of(block.context);
      blocks.append(b);
    }
    s["blocks"] = blocks;
    segments.append(s);
  }
  py::list traces;
  for (const auto& trace : snap.traces) {
    py::list entries;
    for (const auto& e : trace) {
      py::dict d;
      d["action"] = e.action;
      d["addr"] = e.address;
      if (std::string(e.action) == "oom") d["device_free"] = e.address;
      d["size"] = e.size;
      d["stream"] = e.stream;
      d["pool_id"] = py::make_tuple(e.pool.first, e.pool.second);
      d["time_us"] = e.timeUs;
      d["frames"] = frames.of(e.context);
      entries.append(d);
    }
    traces.append(entries);
  }
  py::dict settings;
  settings["PYTORCH_NPU_ALLOC_CONF"] = py::none();
  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = traces;
  result["allocator_settings"] = settings;
  return result;
}

}  // namespace

void initMemoryHistory(py::module_& m) {
  m.def("_npu_recordMemoryHistory", &recordMemoryHistory, py::arg("enabled"),
        py::arg("context"), py::arg("stacks"), py::arg("max_entries"),
        py::arg("clear_history"));
  m.def("_npu_memorySnapshot", &memorySnapshot);
  m.def("_npu_isHistoryEnabled", [] { return alloc::isHistoryEnabled(); });
}

}  // namespace c10_npu::python
