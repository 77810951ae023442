// Entry points: stream capture, graphs and graph execs.
// See Note [Stream capture] and Note [Graph launch] in csrc/npurt/README.md;
// the machinery is in graph/.
#include <cstdio>
#include <fstream>
#include <string>

#include "api_common.h"
#include "graph/capture.h"
#include "graph/conditional.h"
#include "graph/exec.h"
#include "graph/graph.h"
#include "memory.h"

using namespace npurt::internal;

namespace {

npuGraph_t graphHandle(const Runtime& rt, uint64_t id) noexcept {
  return reinterpret_cast<npuGraph_t>(static_cast<uintptr_t>(rt.graphs.toHandle(id)));
}

npuGraphExec_t execHandle(const Runtime& rt, uint64_t id) noexcept {
  return reinterpret_cast<npuGraphExec_t>(static_cast<uintptr_t>(rt.graphExecs.toHandle(id)));
}

std::shared_ptr<Graph> findGraph(Runtime& rt, npuGraph_t handle) {
  return rt.graphs.find(rt.graphs.toId(handleBits(handle)));
}

std::shared_ptr<GraphExec> findExec(Runtime& rt, npuGraphExec_t handle) {
  return rt.graphExecs.find(rt.graphExecs.toId(handleBits(handle)));
}

npuError_t invalidHandle(const char* fn, const char* what, const void* handle) noexcept {
  char buf[64];
  std::snprintf(buf, sizeof buf, "invalid %s handle %p", what, handle);
  return fail(npuErrorInvalidResourceHandle, fn, buf);
}

// The stream of a scope or group call, or an error status.
template <typename Body>
npuError_t onStream(const char* fn, npuStream_t handle, Body&& body) {
  return guarded(fn, [&](Runtime& rt) {
    const std::shared_ptr<Stream> stream = findStream(rt, handle);
    if (stream == nullptr) return invalidStream(fn, handle);
    return body(rt, *stream);
  });
}

}  // namespace

extern "C" {

npuError_t npuStreamBeginCapture(npuStream_t handle, npuStreamCaptureMode mode) {
  constexpr const char* kFn = "npuStreamBeginCapture";
  return onStream(kFn, handle, [&](Runtime&, Stream& stream) {
    const int raw = rawEnumValue(mode);  // any int may arrive from C
    if (raw < npuStreamCaptureModeGlobal || raw > npuStreamCaptureModeRelaxed) {
      return fail(npuErrorInvalidValue, kFn, "unknown capture mode " + std::to_string(raw));
    }
    return beginCapture(stream, static_cast<npuStreamCaptureMode>(raw), kFn);
  });
}

npuError_t npuStreamEndCapture(npuStream_t handle, npuGraph_t* graph) {
  constexpr const char* kFn = "npuStreamEndCapture";
  return onStream(kFn, handle, [&](Runtime& rt, Stream& stream) {
    if (graph == nullptr) return nullArgument(kFn, "graph");
    *graph = nullptr;
    std::shared_ptr<Graph> made;
    if (const npuError_t s = endCapture(stream, made, kFn); s != npuSuccess) return s;
    const uint64_t id = rt.graphs.newId();
    rt.graphs.insert(id, std::move(made));
    *graph = graphHandle(rt, id);
    return npuSuccess;
  });
}

npuError_t npuStreamBeginCaptureToIf(npuStream_t handle, const void* condition,
                                     npuStream_t bodyHandle) {
  constexpr const char* kFn = "npuStreamBeginCaptureToIf";
  return onStream(kFn, handle, [&](Runtime& rt, Stream& stream) {
    const std::shared_ptr<Stream> body = findStream(rt, bodyHandle);
    if (body == nullptr) return invalidStream(kFn, bodyHandle);
    if (condition == nullptr) return nullArgument(kFn, "condition");
    // The byte must be device memory; the node keeps its allocation alive.
    CheckedRange range;
    if (const npuError_t s = rt.memory.checkMemset(const_cast<void*>(condition), 1, range, kFn);
        s != npuSuccess) {
      return s;
    }
    return beginCaptureToIf(stream, condition, std::move(range.dst), *body, kFn);
  });
}

npuError_t npuStreamEndCaptureToIf(npuStream_t body) {
  constexpr const char* kFn = "npuStreamEndCaptureToIf";
  return onStream(kFn, body, [&](Runtime&, Stream& stream) { return endCaptureToIf(stream, kFn); });
}

npuError_t npuStreamGetCaptureInfo(npuStream_t handle, npuStreamCaptureStatus* status,
                                   uint64_t* id) {
  constexpr const char* kFn = "npuStreamGetCaptureInfo";
  return onStream(kFn, handle, [&](Runtime&, Stream& stream) {
    if (status == nullptr) return nullArgument(kFn, "status");
    uint64_t captureId = 0;
    captureStatus(stream, *status, captureId);
    if (id != nullptr) *id = captureId;
    return npuSuccess;
  });
}

npuError_t npuStreamIsCapturing(npuStream_t handle, npuStreamCaptureStatus* status) {
  return npuStreamGetCaptureInfo(handle, status, nullptr);
}

npuError_t npuStreamBeginTaskGroup(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamBeginTaskGroup";
  return onStream(kFn, handle, [&](Runtime&, Stream& s) { return beginTaskGroup(s, kFn); });
}

npuError_t npuStreamEndTaskGroup(npuStream_t handle, npuTaskGroup_t* group) {
  constexpr const char* kFn = "npuStreamEndTaskGroup";
  return onStream(kFn, handle, [&](Runtime&, Stream& s) {
    if (group == nullptr) return nullArgument(kFn, "group");
    return endTaskGroup(s, *group, kFn);
  });
}

npuError_t npuStreamBeginFusedScope(npuStream_t handle, const char* name) {
  constexpr const char* kFn = "npuStreamBeginFusedScope";
  return onStream(kFn, handle, [&](Runtime&, Stream& s) { return beginFusedScope(s, name, kFn); });
}

npuError_t npuStreamEndFusedScope(npuStream_t handle) {
  constexpr const char* kFn = "npuStreamEndFusedScope";
  return onStream(kFn, handle, [&](Runtime&, Stream& s) { return endFusedScope(s, kFn); });
}

npuError_t npuGraphGetNodeCount(npuGraph_t handle, size_t* count) {
  constexpr const char* kFn = "npuGraphGetNodeCount";
  return guarded(kFn, [&](Runtime& rt) {
    if (count == nullptr) return nullArgument(kFn, "count");
    const std::shared_ptr<Graph> graph = findGraph(rt, handle);
    if (graph == nullptr) return invalidHandle(kFn, "graph", handle);
    *count = graph->nodes().size();
    return npuSuccess;
  });
}

npuError_t npuGraphInstantiate(npuGraphExec_t* exec, npuGraph_t handle, unsigned long long flags) {
  constexpr const char* kFn = "npuGraphInstantiate";
  return guarded(kFn, [&](Runtime& rt) {
    if (exec == nullptr) return nullArgument(kFn, "exec");
    *exec = nullptr;
    if (flags != 0u) {
      return fail(npuErrorInvalidValue, kFn, "flags must be 0, got " + std::to_string(flags));
    }
    const std::shared_ptr<Graph> graph = findGraph(rt, handle);
    if (graph == nullptr) return invalidHandle(kFn, "graph", handle);
    std::shared_ptr<GraphExec> made = GraphExec::instantiate(rt, *graph);
    const uint64_t id = rt.graphExecs.newId();
    rt.graphExecs.insert(id, std::move(made));
    *exec = execHandle(rt, id);
    return npuSuccess;
  });
}

npuError_t npuGraphLaunch(npuGraphExec_t handle, npuStream_t streamHandle) {
  constexpr const char* kFn = "npuGraphLaunch";
  return guarded(kFn, [&](Runtime& rt) {
    const std::shared_ptr<GraphExec> exec = findExec(rt, handle);
    if (exec == nullptr) return invalidHandle(kFn, "graph exec", handle);
    const std::shared_ptr<Stream> stream = findStream(rt, streamHandle);
    if (stream == nullptr) return invalidStream(kFn, streamHandle);
    // A launch inside a capture would be a child graph: not supported.
    if (const npuError_t s = refuseIfCapturing(*stream, kFn); s != npuSuccess) return s;
    exec->launch(rt, *stream);
    return npuSuccess;
  });
}

npuError_t npuGraphExecUpdateTaskGroup(npuGraphExec_t handle, npuTaskGroup_t group,
                                       const npuTask* tasks, size_t count) {
  constexpr const char* kFn = "npuGraphExecUpdateTaskGroup";
  return guarded(kFn, [&](Runtime& rt) {
    const std::shared_ptr<GraphExec> exec = findExec(rt, handle);
    if (exec == nullptr) return invalidHandle(kFn, "graph exec", handle);
    return exec->updateGroup(group, tasks, count, kFn);
  });
}

npuError_t npuGraphDestroy(npuGraph_t handle) {
  constexpr const char* kFn = "npuGraphDestroy";
  return guardedRelease(kFn, [&](Runtime& rt) {
    // The tasks are released here unless an exec still holds them (Note
    // [Replayable tasks] in graph/node_work.h).
    if (rt.graphs.erase(rt.graphs.toId(handleBits(handle))) == nullptr) {
      return invalidHandle(kFn, "graph", handle);
    }
    return npuSuccess;
  });
}

npuError_t npuGraphExecDestroy(npuGraphExec_t handle) {
  constexpr const char* kFn = "npuGraphExecDestroy";
  return guardedRelease(kFn, [&](Runtime& rt) {
    // Launches in flight hold the exec until they have run.
    if (rt.graphExecs.erase(rt.graphExecs.toId(handleBits(handle))) == nullptr) {
      return invalidHandle(kFn, "graph exec", handle);
    }
    return npuSuccess;
  });
}

npuError_t npuGraphDebugDotPrint(npuGraph_t handle, const char* path, unsigned int flags) {
  constexpr const char* kFn = "npuGraphDebugDotPrint";
  return guarded(kFn, [&](Runtime& rt) {
    if (path == nullptr) return nullArgument(kFn, "path");
    if (flags != 0u) {
      return fail(npuErrorInvalidValue, kFn, "flags must be 0, got " + std::to_string(flags));
    }
    const std::shared_ptr<Graph> graph = findGraph(rt, handle);
    if (graph == nullptr) return invalidHandle(kFn, "graph", handle);
    std::ofstream out(path, std::ios::trunc);
    out << graph->dot();
    out.close();
    if (!out) return fail(npuErrorInvalidValue, kFn, std::string("cannot write '") + path + "'");
    return npuSuccess;
  });
}

}  // extern "C"
