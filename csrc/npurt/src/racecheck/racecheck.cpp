// The race detector's state and hooks. See Note [Happens-before model] in
// racecheck.h.
#include "racecheck.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "../event.h"
#include "../runtime.h"
#include "../stream.h"

namespace npurt::internal::racecheck {

std::atomic<int> gMode{npuRaceCheckOff};

namespace {

// Reports written to stderr at most (log and abort modes); later ones are
// only counted, so that a racing loop does not flood the output.
constexpr uint64_t kMaxPrinted = 100;

// What a launch hands to the check of its task.
struct PendingTask {
  uint64_t ticket;
  std::shared_ptr<const VectorClock> host;  // the host clock at the launch
  AccessList accesses;                      // declared for its userData
};

struct StreamState {
  uint32_t index = 0;
  uint64_t id = 0;
  int device = 0;
  VectorClock clock;                         // own entry: epoch of its next task
  std::deque<PendingTask> pending;           // by ticket
  // The host clock joined last; held, so that its address cannot come back
  // as a different clock that would then be skipped.
  std::shared_ptr<const VectorClock> joinedHost;
  std::shared_ptr<const VectorClock> copy;   // of `clock`, for records; null when stale
};

class Checker {
 public:
  std::mutex mutex;
  std::unordered_map<uint64_t, StreamState> streams;  // by stream id; never erased
  std::shared_ptr<const VectorClock> host = std::make_shared<const VectorClock>();
  ShadowMemory shadow;
  std::unordered_map<const void*, AccessList> declared;
  std::atomic<uint64_t> reports{0};
  std::string lastReport;  // guarded by mutex

  // Caller holds mutex. References stay valid: the map is node-based and
  // never erased from.
  StreamState& state(const Stream& stream) {
    auto [it, inserted] = streams.try_emplace(stream.id());
    StreamState& st = it->second;
    if (inserted) {
      st.index = static_cast<uint32_t>(streams.size() - 1);
      st.id = stream.id();
      st.device = stream.device();
      st.clock.set(st.index, 1);  // epochs start at 1 (vector_clock.h)
    }
    return st;
  }

  std::shared_ptr<const VectorClock> snapshot(StreamState& st) {
    if (st.copy == nullptr) st.copy = std::make_shared<const VectorClock>(st.clock);
    return st.copy;
  }

  void joinInto(StreamState& st, const VectorClock& other) {
    if (st.clock.join(other)) st.copy.reset();
  }

  // The task at the head of `stream` starts: takes its launch entry
  // (dropping those of tasks launched while the detector was off or
  // discarded), joins the host clock of its launch and returns its declared
  // accesses. Records and waits count too: a record launched after a host
  // synchronize stores a clock that includes it.
  AccessList start(StreamState& st, Stream& stream) {
    const uint64_t ticket = stream.queue().head();
    while (!st.pending.empty() && st.pending.front().ticket < ticket) st.pending.pop_front();
    if (st.pending.empty() || st.pending.front().ticket != ticket) return {};
    PendingTask& p = st.pending.front();
    if (p.host != st.joinedHost) {
      joinInto(st, *p.host);
      st.joinedHost = std::move(p.host);
    }
    AccessList accesses = std::move(p.accesses);
    st.pending.pop_front();
    return accesses;
  }

  void hostJoin(const VectorClock& other) {
    if (host->covers(other)) return;
    auto grown = std::make_shared<VectorClock>(*host);
    grown->join(other);
    host = std::move(grown);
  }
};

Checker& checker() {
  static Checker* c = std::make_unique<Checker>().release();  // leaked: used at exit
  return *c;
}

// The stream whose task this executor thread is running (for a deferred
// version completed from inside a task).
thread_local StreamState* tRunning = nullptr;

std::string hex(uintptr_t value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, value);
  return buf;
}

std::string describeRange(uintptr_t begin, uintptr_t end) {
  return "[" + hex(begin) + ", " + hex(end) + ") (" + std::to_string(end - begin) + " bytes)";
}

std::string describeTask(const TaskRecord& task) {
  return "task '" + task.name + "' on stream " + std::to_string(task.streamId) + " (device " +
         std::to_string(task.device) + ")";
}

std::string describeRace(const TaskRecord& self, const Access& access, const Conflict& c) {
  return "data race: " + describeTask(self) + (access.write ? " writes " : " reads ") +
         describeRange(access.begin, access.end) + " and " + describeTask(*c.other.task) +
         (c.otherWrote ? " wrote " : " read ") + describeRange(c.other.begin, c.other.end) +
         "; they overlap in " + describeRange(c.begin, c.end) + " and nothing orders '" +
         self.name + "' after '" + c.other.task->name +
         "' (no event record/wait between their streams, no host synchronization between "
         "their launches) [NPU_SIM_RACECHECK]";
}

// Counts, keeps and (log and abort modes) prints a report. Caller holds the
// checker's mutex.
void report(Checker& c, std::string text, int mode) {
  const uint64_t n = c.reports.fetch_add(1, std::memory_order_relaxed) + 1;
  if (mode != npuRaceCheckError) {
    if (n <= kMaxPrinted) {
      std::fprintf(stderr, "npurt: %s\n", text.c_str());
    } else if (n == kMaxPrinted + 1) {
      std::fprintf(stderr, "npurt: further race reports are only counted\n");
    }
    if (mode == npuRaceCheckAbort) std::abort();
  }
  c.lastReport = std::move(text);
}

}  // namespace

void setMode(npuRaceCheckMode mode) {
  Checker& c = checker();
  std::lock_guard<std::mutex> lock(c.mutex);
  const bool wasOn = enabled();
  if (mode != npuRaceCheckOff && !wasOn) {
    // A fresh history. Clocks are kept: what they order stays ordered.
    c.shadow.clear();
    c.declared.clear();
    for (auto& [id, st] : c.streams) st.pending.clear();
  }
  gMode.store(mode, std::memory_order_relaxed);
}

uint64_t submit(Stream& stream, const InlineTask& task) {
  Checker& c = checker();
  std::lock_guard<std::mutex> lock(c.mutex);
  // Under the mutex, so that the pending list is in ticket order and the
  // executor (which takes the mutex before it looks) finds the entry.
  StreamState& st = c.state(stream);
  AccessList accesses;
  if (!c.declared.empty()) {
    if (const void* key = task.raceKey(); key != nullptr) {
      auto it = c.declared.find(key);
      if (it != c.declared.end()) {
        accesses = std::move(it->second);
        c.declared.erase(it);
      }
    }
  }
  const uint64_t ticket = stream.enqueue(task);
  st.pending.push_back(PendingTask{ticket, c.host, std::move(accesses)});
  return ticket;
}

void declare(const void* userData, AccessList accesses) {
  Checker& c = checker();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (accesses.empty()) {
    c.declared.erase(userData);  // withdrawn (or nothing on the device)
  } else {
    c.declared[userData] = std::move(accesses);
  }
}

AccessList takeDeclared(const void* userData) {
  Checker& c = checker();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.declared.find(userData);
  if (it == c.declared.end()) return {};
  AccessList out = std::move(it->second);
  c.declared.erase(it);
  return out;
}

AccessList deviceAccesses(const npuMemAccess* accesses, size_t count) {
  AccessList out;
  Runtime& rt = Runtime::instance();
  for (size_t i = 0; i < count; ++i) {
    const npuMemAccess& a = accesses[i];
    if (a.bytes == 0) continue;
    npuPointerAttributes attributes{};
    rt.memory.attributes(a.ptr, attributes);
    if (attributes.type != npuMemoryTypeDevice) continue;  // host memory: not ours to check
    const auto begin = reinterpret_cast<uintptr_t>(a.ptr);
    out.push_back(Access{begin, begin + a.bytes, (a.mode & npuMemAccessRead) != 0u,
                         (a.mode & npuMemAccessWrite) != 0u});
  }
  return out;
}

bool beforeTask(Stream& stream, const InlineTask& task, char* errorBuf,
                size_t errorBufSize) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    StreamState& st = c.state(stream);
    tRunning = &st;
    AccessList accesses = c.start(st, stream);
    if (task.kind == InlineKind::kNode) task.node->appendAccesses(accesses);
    if (accesses.empty()) return true;
    auto self = std::make_shared<const TaskRecord>(
        TaskRecord{task.name(), st.id, st.device, st.index, st.clock.get(st.index)});
    for (const Access& a : accesses) {
      if (std::optional<Conflict> conflict = c.shadow.check(a, st.clock, self.get())) {
        const int mode = gMode.load(std::memory_order_relaxed);
        std::string text = describeRace(*self, a, *conflict);
        if (mode == npuRaceCheckError) std::snprintf(errorBuf, errorBufSize, "%s", text.c_str());
        report(c, std::move(text), mode);
        if (mode == npuRaceCheckError) return false;  // it will not run: no history
        break;  // one report per task
      }
    }
    for (const Access& a : accesses) {
      if (a.write) c.shadow.record(a, self);
    }
    for (const Access& a : accesses) {
      if (!a.write) c.shadow.record(a, self);
    }
  } catch (...) {
    // Out of memory in the checker: the task runs unchecked.
  }
  return true;
}

void afterTask(Stream& stream) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    StreamState& st = c.state(stream);
    st.clock.set(st.index, st.clock.get(st.index) + 1);
    st.copy.reset();
  } catch (...) {
  }
  tRunning = nullptr;
}

void discardTask(Stream& stream) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    StreamState& st = c.state(stream);
    const uint64_t ticket = stream.queue().head();
    while (!st.pending.empty() && st.pending.front().ticket <= ticket) st.pending.pop_front();
  } catch (...) {
  }
}

void onRecord(Stream& stream, EventVersion& version) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    StreamState& st = c.state(stream);
    (void)c.start(st, stream);
    version.setRaceClock(c.snapshot(st));
  } catch (...) {
  }
}

void onWait(Stream& stream, const EventVersion& version) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    StreamState& st = c.state(stream);
    (void)c.start(st, stream);
    if (const auto& clock = version.raceClock()) c.joinInto(st, *clock);
  } catch (...) {
  }
}

void onDeferredComplete(EventVersion& version) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (tRunning != nullptr) {
      // From inside a task: its stream's clock, the task included.
      auto clock = std::make_shared<VectorClock>(tRunning->clock);
      clock->set(tRunning->index, clock->get(tRunning->index) + 1);
      version.setRaceClock(std::move(clock));
    } else {
      version.setRaceClock(c.host);
    }
  } catch (...) {
  }
}

void hostSawStream(const Stream& stream) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.hostJoin(c.state(stream).clock);
  } catch (...) {
  }
}

void hostSawVersion(const EventVersion& version) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (const auto& clock = version.raceClock()) c.hostJoin(*clock);
  } catch (...) {
  }
}

void hostSawDevice(int device) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto& [id, st] : c.streams) {
      if (st.device == device) c.hostJoin(st.clock);
    }
  } catch (...) {
  }
}

void resetRange(const void* ptr, size_t bytes) noexcept {
  try {
    Checker& c = checker();
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto begin = reinterpret_cast<uintptr_t>(ptr);
    c.shadow.reset(begin, begin + bytes);
  } catch (...) {
  }
}

uint64_t reportCount() noexcept { return checker().reports.load(std::memory_order_relaxed); }

std::string lastReport() {
  Checker& c = checker();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.lastReport;
}

}  // namespace npurt::internal::racecheck
