// Work tasks: user tasks, host functions, memcpy and memset.
#include "task.h"

#include <cstdio>
#include <cstring>
#include <exception>

namespace npurt::internal {

UserTask::UserTask(const npuTask& task) : Task(TaskKind::kWork), task_(task), name_(task.name) {
  if (name_ == nullptr) {
    name_ = "task";
  } else if ((task.flags & npuTaskCopyName) != 0u) {
    ownedName_ = task.name;  // may throw std::bad_alloc: the caller still owns userData
    name_ = ownedName_.c_str();
  }
}

int UserTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  int status = 0;
  // run() is a C function pointer, but C++ callers can still smuggle an
  // exception through it; it must become a task failure, not terminate an
  // executor thread.
  try {
    status = task_.run(task_.userData, errorBuf, errorBufSize);
  } catch (const std::exception& e) {
    std::snprintf(errorBuf, errorBufSize, "%s", e.what());
    status = 1;
  } catch (...) {
    std::snprintf(errorBuf, errorBufSize, "unknown exception");
    status = 1;
  }
  // release() runs exactly once, after run() (npuTask contract).
  discard();
  return status;
}

void UserTask::discard() noexcept {
  if (task_.release == nullptr) return;
  try {
    task_.release(task_.userData);
  } catch (...) {
    // A throwing release cannot be reported anywhere useful; swallowing it
    // keeps the executor alive.
  }
}

int HostFnTask::run(char* errorBuf, size_t errorBufSize) noexcept {
  try {
    fn_(userData_);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(errorBuf, errorBufSize, "%s", e.what());
  } catch (...) {
    std::snprintf(errorBuf, errorBufSize, "unknown exception");
  }
  return 1;
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

int MemcpyTask::run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept {
  copyBytes(dst_, src_, count_);
  return 0;
}

int MemsetTask::run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept {
  std::memset(dst_, value_, count_);
  return 0;
}

}  // namespace npurt::internal
