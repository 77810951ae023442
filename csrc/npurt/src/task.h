// Tasks: what a stream's queue holds.
//
// Note [Inline tasks]
// ~~~~~~~~~~~~~~~~~~~
// The two kinds of work that dominate a stream's traffic, host functions
// (npuLaunchHostFunc) and plain user tasks (npuLaunchTask without
// npuTaskCopyName, which is what npurt::launch uses), are never allocated:
// their fields are copied into an InlineTask, which the stream encodes into
// one or two 16-byte entries of its ring (Note [Ring entries] in
// task_queue.h). Everything else (memcpy, memset, user
// tasks with a copied name, event records and waits) is a heap Task, made by
// makeTask in a NodePool block, and the InlineTask only points at it
// (InlineKind::kNode).
//
// Life of a task: created by an entry point, enqueued on a stream, taken by
// the executor that owns the stream, then exactly one of run() or discard(),
// then dispose() (frees a node task; nothing for inline ones). See
// Note [Task failure rule] in csrc/npurt/README.md for when discard()
// replaces run().
//
// Thread safety: a task is touched by one thread at a time (its creator until
// it is enqueued, then the stream's owner); no member needs synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "node_pool.h"
#include "npurt/npurt.h"
#include "npurt/npurt_activity.h"

namespace npurt::internal {

struct Allocation;
namespace racecheck {
struct Access;
}

enum class TaskKind : uint8_t {
  kWork,         // delayed, traced, discarded while the stream is in failure state
  kEventRecord,  // completes an event version; never discarded, never delayed
  kEventWait,    // parks the stream until a version completes; never discarded/delayed
  kControl,      // graph launch bookkeeping (graph/exec.h): traced and discarded like
                 // work, never delayed, never counted by fault injection
};

class Task {
 public:
  explicit Task(TaskKind kind) noexcept : kind_(kind) {}
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  virtual ~Task() = default;

  TaskKind kind() const noexcept { return kind_; }

  // Name for errors and traces; never null, valid until dispose().
  virtual const char* name() const noexcept = 0;
  // What the activity log calls it (npurt_activity.h).
  virtual npuActivityKind activityKind() const noexcept { return npuActivityKindKernel; }

  // Runs the task on an executor thread. Returns 0 on success; on failure a
  // non-zero value, with a NUL-terminated message in errorBuf. Must not
  // throw (implementations catch what user code throws).
  virtual int run(char* errorBuf, size_t errorBufSize) noexcept = 0;

  // Called instead of run() when the task is dropped (failure state or
  // shutdown): releases what the task owns without running it.
  virtual void discard() noexcept {}

  // Race detector (Note [Happens-before model] in racecheck/racecheck.h):
  // the key of the accesses declared for the task (npuTaskDeclareAccesses),
  // and the accesses the task knows itself (copies, memsets, graph nodes),
  // asked for on the executor right before it runs.
  virtual const void* raceKey() const noexcept { return nullptr; }
  virtual void appendAccesses(std::vector<racecheck::Access>& /*out*/) const {}

  // Frees the node. Work and wait tasks live in NodePool blocks (made by
  // makePooled) and return there; an event-record task lives inside its
  // shared version and drops its self-reference instead (see
  // EventRecordTask in event.h).
  virtual void dispose() noexcept {
    releasePooled(this);  // ~Task is virtual: destroys the most-derived object
  }

 private:
  TaskKind kind_;
};

// Owner of a task that has not been enqueued yet; disposes it if the
// enqueue does not happen (without calling release: see npuLaunchTask).
struct TaskDisposer {
  void operator()(Task* task) const noexcept { task->dispose(); }
};
using TaskPtr = std::unique_ptr<Task, TaskDisposer>;

// Makes a pooled task of type T.
template <typename T, typename... Args>
TaskPtr makeTask(Args&&... args) {
  return TaskPtr(makePooled<T>(std::forward<Args>(args)...));
}

// Runs a user task (npuTask::run) and then its release, turning an
// exception smuggled through the C function pointer into a failure.
int runUserTask(const npuTask& task, char* errorBuf, size_t errorBufSize) noexcept;
// Runs npuTask::run only (a graph node, which runs once per launch and is
// released when its graph goes: Note [Replayable tasks] in graph/node_work.h).
int invokeUserRun(const npuTask& task, char* errorBuf, size_t errorBufSize) noexcept;
// Calls npuTask::release if set (a discarded task), swallowing exceptions.
void releaseUserTask(const npuTask& task) noexcept;
// Runs a host function, turning an exception into a failure.
int runHostFn(npuHostFn_t fn, void* userData, char* errorBuf, size_t errorBufSize) noexcept;

// What a queued task is; see Note [Inline tasks].
enum class InlineKind : uint32_t {
  kHostFn,    // npuLaunchHostFunc: hostFn
  kUserTask,  // npuLaunchTask, name not copied: user (name null -> "task")
  kNode,      // any heap Task: node
};

// A task by value: 48 bytes, trivially copyable. The ring stores it encoded
// (Note [Ring entries]); the overflow list and the executor hold it as is.
struct InlineTask {
  // The union's members (named types: ISO C++ has no anonymous structs).
  struct HostFnFields {
    npuHostFn_t fn;
    void* userData;
  };
  struct UserFields {
    const char* name;
    int (*run)(void*, char*, size_t);
    void (*release)(void*);
    void* userData;
  };

  InlineKind kind = InlineKind::kNode;
  uint32_t externalId = 0;  // Note [Activity correlation]; set with enqueueNs (fills padding)
  uint64_t enqueueNs = 0;   // steady-clock ns at enqueue, 0 when tracing was off
  union {
    HostFnFields hostFn;
    UserFields user;
    Task* node;
  };

  InlineTask() noexcept : node(nullptr) {}
  static InlineTask hostFunc(npuHostFn_t fn, void* userData) noexcept {
    InlineTask t;
    t.kind = InlineKind::kHostFn;
    t.hostFn = {fn, userData};
    return t;
  }
  static InlineTask userTask(const npuTask& task) noexcept {
    // Field by field, through volatile, so that the compiler cannot merge
    // two fields into one 16-byte load. The caller has normally just
    // written the struct one field at a time, and a load that spans two
    // stores cannot be forwarded from the store buffer: it waits until the
    // stores reach the cache, behind the previous enqueue's stores into the
    // ring (Note [Ring entries] in task_queue.h). Measured: 21-22 instead
    // of 26-27 ns per npurt::launch in npurt_bench.
    const volatile npuTask& v = task;
    InlineTask t;
    t.kind = InlineKind::kUserTask;
    t.user = {v.name, v.run, v.release, v.userData};
    return t;
  }
  static InlineTask heap(Task* task) noexcept {
    InlineTask t;
    t.kind = InlineKind::kNode;
    t.node = task;
    return t;
  }

  TaskKind taskKind() const noexcept {
    return kind == InlineKind::kNode ? node->kind() : TaskKind::kWork;
  }
  const char* name() const noexcept;
  npuActivityKind activityKind() const noexcept {
    if (kind == InlineKind::kNode) return node->activityKind();
    return kind == InlineKind::kHostFn ? npuActivityKindHostFunc : npuActivityKindKernel;
  }
  int run(char* errorBuf, size_t errorBufSize) noexcept;
  void discard() noexcept;
  // The userData of a host function or user task (the key of its declared
  // accesses, npuTaskDeclareAccesses), else the node's Task::raceKey().
  const void* raceKey() const noexcept;
  void dispose() noexcept {
    if (kind == InlineKind::kNode) node->dispose();
  }
};
static_assert(sizeof(InlineTask) == 48, "an InlineTask is copied on every enqueue: keep it small");

// npuLaunchTask with npuTaskCopyName: the user's run/release/userData and a
// copy of the name (the only user task that needs a node).
class UserTask final : public Task {
 public:
  // `task` must have been validated (run non-null, flags known).
  explicit UserTask(const npuTask& task);
  const char* name() const noexcept override { return name_; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  void discard() noexcept override;
  const void* raceKey() const noexcept override { return task_.userData; }

 private:
  npuTask task_;
  const char* name_;       // task_.name, ownedName_ or "task"
  std::string ownedName_;  // only with npuTaskCopyName
};

// npuMemcpyAsync. Holds the device allocations it touches (null for host
// sides) so that npuFree cannot release them under the copy; see
// Note [Memory lifetime] in csrc/npurt/README.md.
class MemcpyTask final : public Task {
 public:
  // injected: fail when run, copying nothing (Note [Fault injection]).
  MemcpyTask(void* dst, const void* src, size_t count, std::shared_ptr<Allocation> dstAlloc,
             std::shared_ptr<Allocation> srcAlloc, bool injected) noexcept
      : Task(TaskKind::kWork),
        dst_(dst),
        src_(src),
        count_(count),
        injected_(injected),
        dstAlloc_(std::move(dstAlloc)),
        srcAlloc_(std::move(srcAlloc)) {}
  const char* name() const noexcept override { return "npuMemcpyAsync"; }
  npuActivityKind activityKind() const noexcept override { return npuActivityKindMemcpy; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  void appendAccesses(std::vector<racecheck::Access>& out) const override;

 private:
  void* dst_;
  const void* src_;
  size_t count_;
  bool injected_;
  std::shared_ptr<Allocation> dstAlloc_;
  std::shared_ptr<Allocation> srcAlloc_;
};

// npuMemsetAsync; holds its allocation like MemcpyTask.
class MemsetTask final : public Task {
 public:
  MemsetTask(void* dst, int value, size_t count, std::shared_ptr<Allocation> alloc,
             bool injected) noexcept
      : Task(TaskKind::kWork),
        dst_(dst),
        value_(value),
        count_(count),
        injected_(injected),
        alloc_(std::move(alloc)) {}
  const char* name() const noexcept override { return "npuMemsetAsync"; }
  npuActivityKind activityKind() const noexcept override { return npuActivityKindMemset; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  void appendAccesses(std::vector<racecheck::Access>& out) const override;

 private:
  void* dst_;
  int value_;
  size_t count_;
  bool injected_;
  std::shared_ptr<Allocation> alloc_;
};

// An inline task the ring cannot encode (a code pointer with high bits set,
// Note [Ring entries] in task_queue.h), enqueued as a node instead. Never
// holds a kNode task.
class InlineTaskNode final : public Task {
 public:
  explicit InlineTaskNode(const InlineTask& task) noexcept : Task(TaskKind::kWork), task_(task) {}
  const char* name() const noexcept override { return task_.name(); }
  npuActivityKind activityKind() const noexcept override { return task_.activityKind(); }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    return task_.run(errorBuf, errorBufSize);
  }
  void discard() noexcept override { task_.discard(); }
  const void* raceKey() const noexcept override { return task_.raceKey(); }

 private:
  InlineTask task_;
};

// The race detector's accesses of a copy and a memset: the device sides
// only (null allocations are host memory). Shared by the tasks and their
// graph nodes.
void appendCopyAccesses(std::vector<racecheck::Access>& out, void* dst, const void* src,
                        size_t count, bool dstOnDevice, bool srcOnDevice);

// Copies that may overlap (both sides inside one allocation) use memmove;
// everything else memcpy, which is what the bandwidth target is measured
// against. Shared by npuMemcpy and MemcpyTask.
void copyBytes(void* dst, const void* src, size_t count) noexcept;

}  // namespace npurt::internal
