// The node works of a graph. See Note [Replayable tasks] in node_work.h.
#include "node_work.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include "../racecheck/racecheck.h"

namespace npurt::internal {
namespace {

// The accesses declared for a captured task or host function (Note
// [Happens-before model]); they are checked at every launch.
racecheck::AccessList takeDeclared(const void* userData) {
  return racecheck::enabled() ? racecheck::takeDeclared(userData) : racecheck::AccessList{};
}

class TaskWork final : public NodeWork {
 public:
  explicit TaskWork(const npuTask& task) : task_(task), accesses_(takeDeclared(task.userData)) {
    if (task.name == nullptr) {
      name_ = "task";
    } else if ((task.flags & npuTaskCopyName) != 0u) {
      owned_ = task.name;  // may throw: the caller still owns userData then
      name_ = owned_.c_str();
    } else {
      name_ = task.name;
    }
  }
  ~TaskWork() override { releaseUserTask(task_); }  // the one release
  NodeKind kind() const noexcept override { return NodeKind::kTask; }
  const char* name() const noexcept override { return name_; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    return invokeUserRun(task_, errorBuf, errorBufSize);
  }
  void disown() noexcept override { task_.release = nullptr; }
  void appendAccesses(racecheck::AccessList& out) const override {
    out.insert(out.end(), accesses_.begin(), accesses_.end());
  }

 private:
  npuTask task_;
  const char* name_;
  std::string owned_;
  racecheck::AccessList accesses_;
};

class HostFnWork final : public NodeWork {
 public:
  HostFnWork(npuHostFn_t fn, void* userData)
      : fn_(fn), userData_(userData), accesses_(takeDeclared(userData)) {}
  NodeKind kind() const noexcept override { return NodeKind::kHostFn; }
  const char* name() const noexcept override { return "npuLaunchHostFunc"; }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    return runHostFn(fn_, userData_, errorBuf, errorBufSize);
  }
  void appendAccesses(racecheck::AccessList& out) const override {
    out.insert(out.end(), accesses_.begin(), accesses_.end());
  }

 private:
  npuHostFn_t fn_;
  void* userData_;
  racecheck::AccessList accesses_;
};

class MemcpyWork final : public NodeWork {
 public:
  MemcpyWork(void* dst, const void* src, size_t count, std::shared_ptr<Allocation> dstAlloc,
             std::shared_ptr<Allocation> srcAlloc) noexcept
      : dst_(dst),
        src_(src),
        count_(count),
        dstAlloc_(std::move(dstAlloc)),
        srcAlloc_(std::move(srcAlloc)) {}
  NodeKind kind() const noexcept override { return NodeKind::kMemcpy; }
  const char* name() const noexcept override { return "npuMemcpyAsync"; }
  std::string describe() const override {
    return pointerText(dst_) + " <- " + pointerText(src_) + ", " + std::to_string(count_) + " B";
  }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override {
    copyBytes(dst_, src_, count_);
    return 0;
  }
  void appendAccesses(racecheck::AccessList& out) const override {
    appendCopyAccesses(out, dst_, src_, count_, dstAlloc_ != nullptr, srcAlloc_ != nullptr);
  }

 private:
  void* dst_;
  const void* src_;
  size_t count_;
  std::shared_ptr<Allocation> dstAlloc_;  // Note [Memory lifetime]
  std::shared_ptr<Allocation> srcAlloc_;
};

class MemsetWork final : public NodeWork {
 public:
  MemsetWork(void* dst, int value, size_t count, std::shared_ptr<Allocation> alloc) noexcept
      : dst_(dst), value_(value), count_(count), alloc_(std::move(alloc)) {}
  NodeKind kind() const noexcept override { return NodeKind::kMemset; }
  const char* name() const noexcept override { return "npuMemsetAsync"; }
  std::string describe() const override {
    return pointerText(dst_) + " = " + std::to_string(value_) + ", " + std::to_string(count_) +
           " B";
  }
  int run(char* /*errorBuf*/, size_t /*errorBufSize*/) noexcept override {
    std::memset(dst_, value_, count_);
    return 0;
  }
  void appendAccesses(racecheck::AccessList& out) const override {
    appendCopyAccesses(out, dst_, nullptr, count_, true, false);
  }

 private:
  void* dst_;
  int value_;
  size_t count_;
  std::shared_ptr<Allocation> alloc_;
};

class FusedWork final : public NodeWork {
 public:
  FusedWork(std::string name, std::vector<NodeWorkPtr> parts)
      : name_(std::move(name)), parts_(std::move(parts)) {}
  NodeKind kind() const noexcept override { return NodeKind::kFused; }
  const char* name() const noexcept override { return name_.c_str(); }
  std::string describe() const override {
    std::string text = std::to_string(parts_.size()) + " tasks:";
    for (const NodeWorkPtr& part : parts_) text += std::string(" ") + part->name();
    return text;
  }
  int run(char* errorBuf, size_t errorBufSize) noexcept override {
    for (const NodeWorkPtr& part : parts_) {
      const int status = part->run(errorBuf, errorBufSize);
      if (status == 0) continue;
      prefixNodeName(part->name(), errorBuf, errorBufSize);  // names both
      return status;
    }
    return 0;
  }
  void appendAccesses(racecheck::AccessList& out) const override {
    for (const NodeWorkPtr& part : parts_) part->appendAccesses(out);
  }

 private:
  std::string name_;
  std::vector<NodeWorkPtr> parts_;
};

}  // namespace

std::string pointerText(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

void prefixNodeName(const char* name, char* errorBuf, size_t errorBufSize) noexcept {
  char inner[512];
  std::snprintf(inner, sizeof inner, "%s", errorBuf);
  std::snprintf(errorBuf, errorBufSize, "%s: %s", name, inner);
}

const char* nodeKindName(NodeKind kind) noexcept {
  switch (kind) {
    case NodeKind::kTask:
      return "task";
    case NodeKind::kHostFn:
      return "host";
    case NodeKind::kMemcpy:
      return "memcpy";
    case NodeKind::kMemset:
      return "memset";
    case NodeKind::kFused:
      return "fused";
    case NodeKind::kConditional:
      return "if";
  }
  return "node";
}

NodeWorkPtr makeTaskWork(const npuTask& task) { return std::make_shared<TaskWork>(task); }

NodeWorkPtr makeHostFnWork(npuHostFn_t fn, void* userData) {
  return std::make_shared<HostFnWork>(fn, userData);
}

NodeWorkPtr makeMemcpyWork(void* dst, const void* src, size_t count,
                           std::shared_ptr<Allocation> dstAlloc,
                           std::shared_ptr<Allocation> srcAlloc) {
  return std::make_shared<MemcpyWork>(dst, src, count, std::move(dstAlloc), std::move(srcAlloc));
}

NodeWorkPtr makeMemsetWork(void* dst, int value, size_t count, std::shared_ptr<Allocation> alloc) {
  return std::make_shared<MemsetWork>(dst, value, count, std::move(alloc));
}

NodeWorkPtr makeFusedWork(std::string name, std::vector<NodeWorkPtr> parts) {
  return std::make_shared<FusedWork>(std::move(name), std::move(parts));
}

}  // namespace npurt::internal
