// What a graph node does: the re-runnable form of a captured task.
//
// Note [Replayable tasks]
// ~~~~~~~~~~~~~~~~~~~~~~~
// An eager task is consumed: the executor calls run() once and then
// release() (npuTask), or frees the node (memcpy, memset). A captured task
// must run once per graph launch instead, so a capture never enqueues it:
// it moves the task's parts into a NodeWork, which
//  - runs the task's work on every call of run() (npuTask::run only, the
//    host function, the copy or the memset) and never consumes anything;
//  - releases what the task owns exactly once, in its destructor:
//    npuTask::release, the device allocations a copy holds (Note [Memory
//    lifetime]). For a task launched through npurt::launch that is the
//    callable's destructor, so its captures live as long as the graph.
// NodeWorks are shared (std::shared_ptr) between the graph and every exec
// instantiated from it; the last owner to go releases the task: the graph's
// destroy, an exec's destroy, the end of its last launch, or a group update
// that replaces the task. A capture that fails releases its tasks when it
// ends. So the C contract of npuTask becomes, for a captured task: run() is
// called zero or more times, never concurrently for one exec (its launches
// are serialised, Note [Graph launch]), and release() once, after the last
// run. Execs of one graph share the task: run() may then overlap between
// them, so a task with mutable state must not be instantiated twice.
// A task whose run() consumes userData says so with npuTaskNotReplayable and
// cannot be captured.
//
// Thread safety: run() is called by one executor at a time per exec; the
// accessors are immutable after construction.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../racecheck/shadow_memory.h"
#include "../task.h"
#include "npurt/npurt.h"

namespace npurt::internal {

struct Allocation;

enum class NodeKind : uint8_t { kTask, kHostFn, kMemcpy, kMemset, kFused, kConditional };

// "task", "host", "memcpy", "memset", "fused", "if".
const char* nodeKindName(NodeKind kind) noexcept;

class NodeWork {
 public:
  NodeWork() = default;
  NodeWork(const NodeWork&) = delete;
  NodeWork& operator=(const NodeWork&) = delete;
  virtual ~NodeWork() = default;

  virtual NodeKind kind() const noexcept = 0;
  // For errors, traces and the DOT dump; valid while the work lives.
  virtual const char* name() const noexcept = 0;
  // One line of parameters for the DOT dump (pointers, sizes).
  virtual std::string describe() const { return {}; }
  // Runs the work once; 0, or non-zero with a message in errorBuf. Never
  // throws, never consumes: it may be called again.
  virtual int run(char* errorBuf, size_t errorBufSize) noexcept = 0;
  // Gives up what the work would release (an npuTask's release): for a work
  // made for a call that then fails, whose caller keeps ownership.
  virtual void disown() noexcept {}
  // The race detector's accesses of one run (Note [Happens-before model] in
  // racecheck/racecheck.h): declared ones taken when the work was made
  // (while the detector was on), copies' and memsets' own.
  virtual void appendAccesses(std::vector<racecheck::Access>& /*out*/) const {}
};

using NodeWorkPtr = std::shared_ptr<NodeWork>;

// "0x..." for DOT labels and describe().
std::string pointerText(const void* p);
// Puts "<name>: " before the failure message in errorBuf: a work that runs
// other works (a fused scope, an if node's body) names the one that failed.
void prefixNodeName(const char* name, char* errorBuf, size_t errorBufSize) noexcept;

// npuLaunchTask: run() per launch, release() in the destructor. Takes a copy
// of the name if the task asked for one.
NodeWorkPtr makeTaskWork(const npuTask& task);
// npuLaunchHostFunc.
NodeWorkPtr makeHostFnWork(npuHostFn_t fn, void* userData);
// npuMemcpyAsync; holds the device allocations (null for host sides).
NodeWorkPtr makeMemcpyWork(void* dst, const void* src, size_t count,
                           std::shared_ptr<Allocation> dstAlloc,
                           std::shared_ptr<Allocation> srcAlloc);
// npuMemsetAsync; holds the allocation.
NodeWorkPtr makeMemsetWork(void* dst, int value, size_t count, std::shared_ptr<Allocation> alloc);
// A fused scope: runs `parts` in order, stopping at the first failure.
NodeWorkPtr makeFusedWork(std::string name, std::vector<NodeWorkPtr> parts);

}  // namespace npurt::internal
