// Work tasks: user tasks, host functions, memcpy and memset, and the
// dispatch of inline tasks (Note [Inline tasks] in task.h).
#include "task.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "fault.h"
#include "racecheck/shadow_memory.h"

namespace npurt::internal {

UserTask::UserTask(const npuTask& task) : Task(TaskKind::kWork), task_(task), name_(task.name) {
  if (name_ == nullptr) {
    name_ = "task";
  } else if ((task.flags & npuTaskCopyName) != 0u) {
    ownedName_ = task.name;  // may throw std::bad_alloc: the caller still owns userData
    name_ = ownedName_.c_str();
  }
}

int runUserTask(const npuTask& task, char* errorBuf, size_t errorBufSize) noexcept {
  const int status = invokeUserRun(task, errorBuf, errorBufSize);
  // release() runs exactly once, after run() (npuTask contract).
  releaseUserTask(task);
  return status;
}

int invokeUserRun(const npuTask& task, char* errorBuf, size_t errorBufSize) noexcept {
  int status = 0;
  // run() is a C function pointer, but C++ callers can still smuggle an
  // exception through it; it must become a task failure, not terminate an
  // executor thread.
  try {
    status = task.run(task.userData, errorBuf, errorBufSize);
  } catch (const std::exception& e) {
    std::snprintf(errorBuf, errorBufSize, "%s", e.what());
    status = 1;
  } catch (...) {
    std::snprintf(errorBuf, errorBufSize, "unknown exception");
    status = 1;
  }
  return status;
}

void releaseUserTask(const npuTask& task) noexcept {
  if (task.release == nullptr) return;
  try {
    task.release(task.userData);
  } catch (...) {
    // A throwing release cannot be reported anywhere useful; swallowing it
    // keeps the executor alive.
  }
}

int runHostFn(npuHostFn_t fn, void* userData, char* errorBuf, size_t errorBufSize) noexcept {
  try {
    fn(userData);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(errorBuf, errorBufSize, "%s", e.what());
  } catch (...) {
    std::snprintf(errorBuf, errorBufSize, "unknown exception");
  }
  return 1;
}

int UserTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  return runUserTask(task_, errorBuf, errorBufSize);
}

void UserTask::discard() noexcept { releaseUserTask(task_); }

namespace {

npuTask asNpuTask(const InlineTask& t) noexcept {
  return npuTask{t.user.name, t.user.run, t.user.release, t.user.userData, 0u};
}

}  // namespace

const char* InlineTask::name() const noexcept {
  switch (kind) {
    case InlineKind::kHostFn:
      return "npuLaunchHostFunc";
    case InlineKind::kUserTask:
      return user.name != nullptr ? user.name : "task";
    case InlineKind::kNode:
      break;
  }
  return node->name();
}

int InlineTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  switch (kind) {
    case InlineKind::kHostFn:
      return runHostFn(hostFn.fn, hostFn.userData, errorBuf, errorBufSize);
    case InlineKind::kUserTask:
      return runUserTask(asNpuTask(*this), errorBuf, errorBufSize);
    case InlineKind::kNode:
      break;
  }
  return node->run(errorBuf, errorBufSize);
}

void InlineTask::discard() noexcept {
  switch (kind) {
    case InlineKind::kHostFn:
      return;
    case InlineKind::kUserTask:
      return releaseUserTask(asNpuTask(*this));
    case InlineKind::kNode:
      break;
  }
  node->discard();
}

void copyBytes(void* dst, const void* src, size_t count) noexcept {
  const auto* d = static_cast<const unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Pointer comparison across unrelated objects goes through uintptr_t.
  const auto di = reinterpret_cast<uintptr_t>(d);
  const auto si = reinterpret_cast<uintptr_t>(s);
  const bool overlap = di < si + count && si < di + count;
  if (overlap) {
    std::memmove(dst, src, count);
  } else {
    std::memcpy(dst, src, count);
  }
}

const void* InlineTask::raceKey() const noexcept {
  switch (kind) {
    case InlineKind::kHostFn:
      return hostFn.userData;
    case InlineKind::kUserTask:
      return user.userData;
    case InlineKind::kNode:
      break;
  }
  return node->raceKey();
}

void appendCopyAccesses(std::vector<racecheck::Access>& out, void* dst, const void* src,
                        size_t count, bool dstOnDevice, bool srcOnDevice) {
  if (dstOnDevice) {
    const auto d = reinterpret_cast<uintptr_t>(dst);
    out.push_back(racecheck::Access{d, d + count, false, true});
  }
  if (srcOnDevice) {
    const auto s = reinterpret_cast<uintptr_t>(src);
    out.push_back(racecheck::Access{s, s + count, true, false});
  }
}

void MemcpyTask::appendAccesses(std::vector<racecheck::Access>& out) const {
  appendCopyAccesses(out, dst_, src_, count_, dstAlloc_ != nullptr, srcAlloc_ != nullptr);
}

void MemsetTask::appendAccesses(std::vector<racecheck::Access>& out) const {
  appendCopyAccesses(out, dst_, nullptr, count_, true, false);
}

int MemcpyTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  if (injected_) [[unlikely]] {
    std::snprintf(errorBuf, errorBufSize, "%s", kInjectedFault);
    return 1;
  }
  copyBytes(dst_, src_, count_);
  return 0;
}

int MemsetTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  if (injected_) [[unlikely]] {
    std::snprintf(errorBuf, errorBufSize, "%s", kInjectedFault);
    return 1;
  }
  std::memset(dst_, value_, count_);
  return 0;
}

}  // namespace npurt::internal
