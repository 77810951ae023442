// See Mstx.h and Note [Markers on the simulator].
#include "profiler/Mstx.h"

#include <ATen/record_function.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/TaskQueue.h"

namespace c10_npu::mstx {
namespace {

std::string shown(const std::string& message, const std::string& domain) {
  return domain == "default" ? message : domain + ": " + message;
}

// A host annotation open from construction to destruction.
class HostRange {
 public:
  explicit HostRange(std::string name)
      : name_(std::move(name)), record_(at::RecordScope::USER_SCOPE) {
    record_.before(name_);
  }

 private:
  std::string name_;  // outlives the RecordFunction that names it
  at::RecordFunction record_;
};

// The do-nothing task that places a marker in a stream's work.
struct MarkerTask {
  std::string name;
};

int runMarker(void* /*user*/, char* /*errorBuf*/, size_t /*errorBufSize*/) { return 0; }
void releaseMarker(void* user) {
  std::unique_ptr<MarkerTask> owned(static_cast<MarkerTask*>(user));
}

void markStream(const NPUStream& stream, std::string name) {
  auto marker = std::make_unique<MarkerTask>(MarkerTask{"mstx: " + std::move(name)});
  npuTask task{};
  task.name = marker->name.c_str();  // copied by npurt at launch (npuTaskCopyName)
  task.run = &runMarker;
  task.release = &releaseMarker;
  task.flags = npuTaskCopyName;
  task.userData = marker.release();  // queue::launch owns it from here on
  queue::launch(stream, task);
}

struct Range {
  std::unique_ptr<HostRange> host;
  std::optional<NPUStream> stream;
  std::string name;
};

struct Ranges {
  std::mutex mutex;
  std::map<uint64_t, Range> open;  // by id
};

Ranges& ranges() {
  static auto* r = std::make_unique<Ranges>().release();  // leaked: used at exit
  return *r;
}

std::atomic<uint64_t> gNextRangeId{1};

// This thread's pushed ranges, per domain, innermost last.
thread_local std::unordered_map<std::string, std::vector<Range>> tlsPushed;

}  // namespace

void mark(const std::string& message, const NPUStream* stream, const std::string& domain) {
  const std::string name = shown(message, domain);
  {
    HostRange instant(name);
  }
  if (stream != nullptr) markStream(*stream, name);
}

uint64_t rangeStart(const std::string& message, const NPUStream* stream,
                    const std::string& domain) {
  Range range{std::make_unique<HostRange>(shown(message, domain)), std::nullopt,
              shown(message, domain)};
  if (stream != nullptr) {
    markStream(*stream, range.name + " (start)");
    range.stream = *stream;
  }
  // relaxed: ids only need to be unique.
  const uint64_t id = gNextRangeId.fetch_add(1, std::memory_order_relaxed);
  Ranges& r = ranges();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.open.emplace(id, std::move(range));
  return id;
}

void rangeEnd(uint64_t id, const std::string& /*domain*/) {
  Range range;
  {
    Ranges& r = ranges();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.open.find(id);
    if (it == r.open.end()) return;
    range = std::move(it->second);
    r.open.erase(it);
  }
  if (range.stream.has_value()) markStream(*range.stream, range.name + " (end)");
  range.host.reset();  // the host range ends here, after the stream's end mark was queued
}

int rangePush(const std::string& message, const NPUStream* stream, const std::string& domain) {
  std::vector<Range>& pushed = tlsPushed[domain];
  Range range{std::make_unique<HostRange>(shown(message, domain)), std::nullopt,
              shown(message, domain)};
  if (stream != nullptr) {
    markStream(*stream, range.name + " (start)");
    range.stream = *stream;
  }
  pushed.push_back(std::move(range));
  return static_cast<int>(pushed.size()) - 1;
}

int rangePop(const std::string& domain) {
  auto it = tlsPushed.find(domain);
  if (it == tlsPushed.end() || it->second.empty()) return -1;
  std::vector<Range>& pushed = it->second;
  const int depth = static_cast<int>(pushed.size()) - 1;
  Range& range = pushed.back();
  if (range.stream.has_value()) markStream(*range.stream, range.name + " (end)");
  pushed.pop_back();
  return depth;
}

}  // namespace c10_npu::mstx
