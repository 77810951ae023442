// Chrome trace JSON writer. See trace.h for the layout.
#include "trace.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "clock.h"
#include "errors.h"

namespace npurt::internal {
namespace {

// JSON string escaping for task names (user supplied).
std::string jsonEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Microseconds since `origin`, as the fractional number Chrome traces use.
double toUs(uint64_t ns, uint64_t origin) {
  return ns >= origin ? static_cast<double>(ns - origin) / 1000.0
                      : -static_cast<double>(origin - ns) / 1000.0;
}

struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};

}  // namespace

void Trace::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  originNs_ = nowNs();
  modes_.fetch_or(kFileMode, std::memory_order_relaxed);
}

void Trace::stop() noexcept { modes_.fetch_and(static_cast<uint8_t>(~kFileMode), std::memory_order_relaxed); }

void Trace::startActivities() {
  activities_.clear();
  modes_.fetch_or(kActivityMode, std::memory_order_relaxed);
}

void Trace::stopActivities() noexcept {
  modes_.fetch_and(static_cast<uint8_t>(~kActivityMode), std::memory_order_relaxed);
}

void Trace::record(const TraceRecord& record) noexcept {
  const uint8_t modes = modes_.load(std::memory_order_relaxed);
  if ((modes & kActivityMode) != 0) activities_.append(record);
  if ((modes & kFileMode) == 0) return;
  try {
    Entry entry{record.device,  record.stream, record.name,  record.enqueueNs,
                record.startNs, record.endNs,  record.failed};
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
  } catch (...) {
    // Out of memory: losing a trace record is better than losing the task.
  }
}

npuError_t Trace::write(const char* path, const char* function) const {
  std::vector<Entry> entries;
  uint64_t origin = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries = entries_;
    origin = originNs_;
  }
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path, "w"));
  if (file == nullptr) {
    return fail(npuErrorInvalidValue, function,
                std::string("cannot open '") + path + "' for writing: " + std::strerror(errno));
  }
  std::FILE* f = file.get();
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
  bool first = true;
  const auto separator = [&] {
    if (!first) std::fputs(",\n", f);
    first = false;
  };
  // Metadata first: name every device process and stream lane that appears.
  std::set<int> devices;
  std::set<std::pair<int, uint64_t>> lanes;
  for (const Entry& e : entries) {
    devices.insert(e.device);
    lanes.emplace(e.device, e.stream);
  }
  for (const int device : devices) {
    separator();
    std::fprintf(f,
                 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                 "\"args\":{\"name\":\"NPU %d\"}}",
                 device, device);
    separator();
    std::fprintf(f,
                 "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                 "\"args\":{\"sort_index\":%d}}",
                 device, device);
  }
  for (const auto& [device, stream] : lanes) {
    separator();
    std::fprintf(f,
                 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64
                 ",\"args\":{\"name\":\"stream %" PRIu64 "\"}}",
                 device, stream, stream);
  }
  for (const Entry& e : entries) {
    separator();
    const double ts = toUs(e.startNs, origin);
    const double dur = static_cast<double>(e.endNs - e.startNs) / 1000.0;
    std::fprintf(f,
                 "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%" PRIu64
                 ",\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
                 jsonEscape(e.name).c_str(), e.failed ? "task,failed" : "task", e.device, e.stream,
                 ts, dur);
    if (e.enqueueNs != 0) {
      std::fprintf(f, "\"enqueue_us\":%.3f,\"queued_us\":%.3f,", toUs(e.enqueueNs, origin),
                   static_cast<double>(e.startNs - std::min(e.startNs, e.enqueueNs)) / 1000.0);
    }
    std::fprintf(f, "\"failed\":%s}}", e.failed ? "true" : "false");
  }
  std::fputs("\n]}\n", f);
  if (std::ferror(f) != 0) {
    return fail(npuErrorInvalidValue, function, std::string("write to '") + path + "' failed");
  }
  if (std::fclose(file.release()) != 0) {
    return fail(npuErrorInvalidValue, function, std::string("closing '") + path + "' failed");
  }
  return npuSuccess;
}

}  // namespace npurt::internal
