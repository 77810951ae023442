// Tasks: the nodes of a stream's queue.
//
// A task is one heap node (the intrusive MpscNode is its first base), type
// erased through virtual functions. Each kind of work the runtime enqueues
// (user task, host function, memcpy, memset, event record, event wait) is one
// allocation: payloads live inside the node; references to device memory and
// event versions are shared_ptr copies, which do not allocate.
//
// Life of a task: created by an entry point, pushed onto a stream, popped by
// the executor that owns the stream, then exactly one of run() or discard(),
// then dispose() (frees the node). See Note [Task failure rule] in
// csrc/npurt/README.md for when discard() replaces run().
//
// Thread safety: a task is touched by one thread at a time (its creator until
// push, then the stream's owner); no member needs synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "mpsc_queue.h"
#include "node_pool.h"
#include "npurt/npurt.h"

namespace npurt::internal {

struct Allocation;

enum class TaskKind : uint8_t {
  kWork,         // delayed, traced, discarded while the stream is in failure state
  kEventRecord,  // completes an event version; never discarded, never delayed
  kEventWait,    // parks the stream until a version completes; never discarded/delayed
};

class Task : public MpscNode {
 public:
  explicit Task(TaskKind kind) noexcept : kind_(kind) {}
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  virtual ~Task() = default;

  TaskKind kind() const noexcept { return kind_; }

  // Name for errors and traces; never null, valid until dispose().
  virtual const char* name() const noexcept = 0;

  // Runs the task on an executor thread. Returns 0 on success; on failure a
  // non-zero value, with a NUL-terminated message in errorBuf. Must not
  // throw (implementations catch what user code throws).
  virtual int run(char* errorBuf, size_t errorBufSize) noexcept = 0;

  // Called instead of run() when the task is dropped (failure state or
  // shutdown): releases what the task owns without running it.
  virtual void discard() noexcept {}

  // Frees the node. Work and wait tasks live in NodePool blocks (made by
  // makePooled) and return there; an event-record task lives inside its
  // shared version and drops its self-reference instead (see
  // EventRecordTask in event.h).
  virtual void dispose() noexcept {
    void* block = this;
    this->~Task();  // virtual: destroys the most-derived object
    NodePool::release(block);
  }

  // Steady-clock ns at enqueue, 0 when tracing was off at enqueue.
  uint64_t enqueueNs = 0;

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

// npuLaunchTask: the user's run/release/userData.
class UserTask final : public Task {
 public:
  // `task` must have been validated (run non-null, flags known).
  explicit UserTask(const npuTask& task);
  const char* name() const noexcept override { return name_; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;
  void discard() noexcept override;

 private:
  npuTask task_;
  const char* name_;       // task_.name, ownedName_ or "task"
  std::string ownedName_;  // only with npuTaskCopyName
};

// npuLaunchHostFunc.
class HostFnTask final : public Task {
 public:
  HostFnTask(npuHostFn_t fn, void* userData) noexcept
      : Task(TaskKind::kWork), fn_(fn), userData_(userData) {}
  const char* name() const noexcept override { return "npuLaunchHostFunc"; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;

 private:
  npuHostFn_t fn_;
  void* userData_;
};

// npuMemcpyAsync. Holds the device allocations it touches (null for host
// sides) so that npuFree cannot release them under the copy; see
// Note [Memory lifetime] in csrc/npurt/README.md.
class MemcpyTask final : public Task {
 public:
  MemcpyTask(void* dst, const void* src, size_t count, std::shared_ptr<Allocation> dstAlloc,
             std::shared_ptr<Allocation> srcAlloc) noexcept
      : Task(TaskKind::kWork),
        dst_(dst),
        src_(src),
        count_(count),
        dstAlloc_(std::move(dstAlloc)),
        srcAlloc_(std::move(srcAlloc)) {}
  const char* name() const noexcept override { return "npuMemcpyAsync"; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;

 private:
  void* dst_;
  const void* src_;
  size_t count_;
  std::shared_ptr<Allocation> dstAlloc_;
  std::shared_ptr<Allocation> srcAlloc_;
};

// npuMemsetAsync; holds its allocation like MemcpyTask.
class MemsetTask final : public Task {
 public:
  MemsetTask(void* dst, int value, size_t count, std::shared_ptr<Allocation> alloc) noexcept
      : Task(TaskKind::kWork), dst_(dst), value_(value), count_(count), alloc_(std::move(alloc)) {}
  const char* name() const noexcept override { return "npuMemsetAsync"; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override;

 private:
  void* dst_;
  int value_;
  size_t count_;
  std::shared_ptr<Allocation> alloc_;
};

// Copies that may overlap (both sides inside one allocation) use memmove;
// everything else memcpy, which is what the bandwidth target is measured
// against. Shared by npuMemcpy and MemcpyTask.
void copyBytes(void* dst, const void* src, size_t count) noexcept;

}  // namespace npurt::internal
