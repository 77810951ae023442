// See TaskQueue.h and Note [Task queue drain rule].
#include "core/TaskQueue.h"

#if defined(__linux__)
#include <pthread.h>
#endif

#include <c10/util/CallOnce.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/ActivityCorrelation.h"
#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/graphs/CaptureRegistry.h"

namespace c10_npu::queue {
namespace {

constexpr int kMaxDevices = 32;

struct Item {
  enum class Kind : uint8_t { kLaunch, kRecord, kWait, kGraph };
  Kind kind = Kind::kLaunch;
  npuStream_t stream = nullptr;
  npuTask task{};                  // kLaunch
  npuEvent_t event = nullptr;      // kRecord, kWait
  npuGraphExec_t exec = nullptr;   // kGraph
  uint32_t correlationId = 0;      // Note [Correlation through the task queue]
};

const char* itemName(const Item& item) {
  switch (item.kind) {
    case Item::Kind::kLaunch:
      return item.task.name != nullptr ? item.task.name : "task";
    case Item::Kind::kRecord:
      return "event record";
    case Item::Kind::kWait:
      return "event wait";
    case Item::Kind::kGraph:
      return "NPUGraph::replay";
  }
  return "task";
}

// Submits one item to npurt; returns the failure message or "". Does not
// release a refused task: the caller decides how to fail it.
std::string submit(Item& item) {
  const profiler::ExternalIdScope correlation(item.correlationId);
  npuError_t status = npuSuccess;
  switch (item.kind) {
    case Item::Kind::kLaunch:
      status = npuLaunchTask(item.stream, &item.task);
      break;
    case Item::Kind::kRecord:
      status = npuEventRecord(item.event, item.stream);
      break;
    case Item::Kind::kWait:
      status = npuStreamWaitEvent(item.stream, item.event, 0);
      break;
    case Item::Kind::kGraph:
      status = npuGraphLaunch(item.exec, item.stream);
      break;
  }
  if (status == npuSuccess) return {};
  return std::string(itemName(item)) + ": " + npuGetErrorName(status) + ": " +
         npuGetLastErrorMessage();
}

std::string consumerErrorText(const std::string& error) {
  return "The task queue failed to launch " + error +
         ". Since operators are launched asynchronously, the Python stack trace may not point "
         "at the failing operator; set ASCEND_LAUNCH_BLOCKING=1 to get an exact one.";
}

thread_local const std::string* tlsFailedLaunch = nullptr;
const std::string kRaisedToCaller;  // see failedLaunchMessage()

// Calls the release of a task npurt never accepted, telling it why (see
// failedLaunchMessage()).
void releaseRefused(const npuTask& task, const std::string& why) noexcept {
  if (task.release == nullptr) return;
  const std::string* saved = std::exchange(tlsFailedLaunch, &why);
  task.release(task.userData);
  tlsFailedLaunch = saved;
}

// Note [Launch failures belong to streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When npurt refuses an item the consumer submits (say a launch under fault
// injection, or onto a stream that is being torn down), the failure is made
// the failure of the item's stream inside the runtime: the consumer launches
// a marker task in the item's place that fails with the launch error. The
// runtime then reports it exactly once, by that stream's synchronize or query
// or its device's synchronize (Note [Task failure rule]), discards the work
// behind it like any task failure, and the marker's release releases the
// refused task (which poisons its outputs, Note [Poisoned memory]). Only if
// the stream refuses the marker too (it no longer exists) is the error kept by
// the queue, filed under the stream, and raised by the next drain of that
// stream or of its device. Pushing never raises another stream's failure.
struct MarkerTask {
  std::string message;
  npuTask refused;
};

int runMarker(void* user, char* errorBuf, size_t errorBufSize) {
  const auto* marker = static_cast<const MarkerTask*>(user);
  std::snprintf(errorBuf, errorBufSize, "%s", marker->message.c_str());
  return 1;
}

void releaseMarker(void* user) {
  std::unique_ptr<MarkerTask> marker(static_cast<MarkerTask*>(user));
  releaseRefused(marker->refused, marker->message);
}

// Turns a refused item into its stream's failure. Returns "" if the runtime
// took the marker, else the error to file under the stream. Owns the item's
// task in every case.
std::string failOnStream(Item& item, const std::string& error) noexcept {
  const std::string text = consumerErrorText(error);
  npuTask refused{};
  if (item.kind == Item::Kind::kLaunch) refused = item.task;
  try {
    auto marker = std::make_unique<MarkerTask>(MarkerTask{text, refused});
    npuTask task{};
    task.name = itemName(item);
    task.run = &runMarker;
    task.release = &releaseMarker;
    task.userData = marker.get();
    if (npuLaunchTask(item.stream, &task) == npuSuccess) {
      (void)marker.release();  // the runtime owns it now
      return {};
    }
  } catch (...) {
    // Out of memory for the marker: file the error instead.
  }
  releaseRefused(refused, text);
  return text;
}

void destroyReadyEvents() noexcept;

// One producer/consumer queue. Producers push under a mutex (short critical
// section: a vector push_back); the consumer swaps the whole batch out and
// submits it without holding the lock, so producers never wait for npurt.
class Queue {
 public:
  explicit Queue(bool busyPoll) : busyPoll_(busyPoll), consumer_([this] { consumerLoop(); }) {}

  // Never destroyed: see allQueues(). Declared for completeness.
  ~Queue() = default;

  // Returns the item's ticket (1, 2, ...): it is submitted once
  // submittedCount() reaches it. Never raises: see Note [Launch failures
  // belong to streams].
  uint64_t push(Item&& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
    const uint64_t ticket = ++pushed_;
    pending_.store(true, std::memory_order_release);
    const bool wake = consumerWaiting_;
    lock.unlock();
    if (wake) workCv_.notify_one();
    return ticket;
  }

  // acquire: pairs with the release store after a batch was submitted.
  uint64_t submittedCount() const { return submittedPublished_.load(std::memory_order_acquire); }

  // Tickets handed out so far: an item pushed before this call is submitted
  // once submittedCount() reaches the value.
  uint64_t pushedCount() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_;
  }

  // Waits until every item pushed before the call was submitted. With
  // `report`, then raises the first error filed under `stream` (any
  // stream's if nullptr) and forgets it.
  void drain(npuStream_t stream, bool report) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = pushed_;
    if (submitted_ < target) {
      ++drainWaiters_;
      doneCv_.wait(lock, [&] { return submitted_ >= target; });
      --drainWaiters_;
    }
    if (!report || filed_.empty()) return;
    for (auto it = filed_.begin(); it != filed_.end(); ++it) {
      if (stream != nullptr && it->first != stream) continue;
      std::string error = std::move(it->second);
      filed_.erase(it);
      lock.unlock();
      TORCH_CHECK(false, error, NPU_ERROR_SUFFIX);
    }
  }

  bool hasPending() {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_ < pushed_;
  }

 private:
  void consumerLoop() {
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), "npu taskqueue");  // for top -H, perf, debuggers
#endif
    std::vector<Item> batch;
    std::vector<std::pair<npuStream_t, std::string>> filed;
    for (;;) {
      watchForWork();
      {
        std::unique_lock<std::mutex> lock(mutex_);
        consumerWaiting_ = true;
        workCv_.wait(lock, [&] { return !items_.empty(); });
        consumerWaiting_ = false;
        batch.swap(items_);
        pending_.store(false, std::memory_order_relaxed);
      }
      for (Item& item : batch) {
        std::string error = submit(item);
        if (error.empty()) continue;
        std::string unplaced = failOnStream(item, error);
        if (!unplaced.empty()) filed.emplace_back(item.stream, std::move(unplaced));
      }
      const uint64_t n = batch.size();
      batch.clear();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        submitted_ += n;
        submittedPublished_.store(submitted_, std::memory_order_release);
        for (auto& f : filed) filed_.push_back(std::move(f));
        filed.clear();
        if (drainWaiters_ > 0) doneCv_.notify_all();
      }
      destroyReadyEvents();  // Note [Event destruction by ticket]
    }
  }

  // Note [Task queue consumer linger]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A host thread launching ops back to back pushes every few microseconds,
  // and the consumer submits a push in less than that. If the consumer went
  // to sleep as soon as the queue was empty, nearly every push would find it
  // asleep and pay a futex wake-up (a system call, and a context switch for
  // the consumer), which was most of a tiny op's host latency. So before it
  // sleeps the consumer watches pending_ for kLinger, yielding its core
  // between looks so that on a machine with few cores the producer it waits
  // for can run. TASK_QUEUE_ENABLE=2 watches without yielding (busy poll).
  // acquire pairs with the release in push() (the lock taken afterwards
  // orders the items anyway).
  // TASK_QUEUE_ENABLE=2 polls without yielding, for kBusyLinger: long
  // enough to cover the gaps of a busy training step, short enough that an
  // idle process does not keep a core spinning forever.
  static constexpr std::chrono::nanoseconds kLinger{50'000};
  static constexpr std::chrono::nanoseconds kBusyLinger{5'000'000};
  void watchForWork() const {
    const auto deadline = std::chrono::steady_clock::now() + (busyPoll_ ? kBusyLinger : kLinger);
    while (!pending_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      if (!busyPoll_) std::this_thread::yield();
    }
  }

  // Note [Task queue cache lines]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // What a push writes (the lock and the vector, then pending_) and what the
  // consumer writes after a batch (the submitted counts) sit on separate
  // cache lines, so that a push does not also fetch a line the consumer has
  // just written, and the consumer's polling of pending_ does not take the
  // push's lock line away. Measured in docs/PERFORMANCE.md (session 24).
  alignas(64) std::mutex mutex_;
  std::vector<Item> items_;       // guarded by mutex_
  uint64_t pushed_ = 0;           // guarded by mutex_
  bool consumerWaiting_ = false;  // guarded by mutex_
  int drainWaiters_ = 0;          // guarded by mutex_
  alignas(64) std::atomic<bool> pending_{false};
  alignas(64) uint64_t submitted_ = 0;           // guarded by mutex_
  std::atomic<uint64_t> submittedPublished_{0};  // submitted_, readable without the lock
  alignas(64) const bool busyPoll_;
  std::condition_variable workCv_;  // consumer sleeps here
  std::condition_variable doneCv_;  // drainers sleep here
  // Errors of refused items whose stream refused the marker as well, by
  // stream, oldest first; guarded by mutex_. See Note [Launch failures
  // belong to streams].
  std::vector<std::pair<npuStream_t, std::string>> filed_;
  std::thread consumer_;                         // last member: starts after the rest exist
};

// Queues are created lazily and leaked on purpose: their consumer threads may
// be blocked at process exit, and joining or destroying them from a static
// destructor would race with npurt's own shutdown. See Note [Shutdown order]
// in csrc/npurt/README.md.
//
// Note [Task queue routing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Finding the queue of a launch takes no lock: the device queues and the
// per-stream queues of managed streams (PER_STREAM_QUEUE=1) sit in fixed
// tables of atomic pointers, indexed by device and by the stream id's kind and
// index (Note [StreamId assignment] in NPUStream.h); a pointer is published
// once, with release, after its queue was built under `mutex`, and never
// changes. Only external streams in full mode with PER_STREAM_QUEUE=1 go
// through a map under `mutex`.
constexpr int kKinds = 6;         // StreamIdType values
constexpr int kIndexesPerKind = 32;
struct Queues {
  std::mutex mutex;  // creation, the external map, `owned`
  std::array<std::atomic<Queue*>, kMaxDevices> device{};
  std::array<std::array<std::atomic<Queue*>, kKinds * kIndexesPerKind>, kMaxDevices> perStream{};
  std::map<std::pair<int, c10::StreamId>, Queue*> perExternalStream;
  std::vector<std::unique_ptr<Queue>> owned;
};

Queues& allQueues() {
  static auto* q = std::make_unique<Queues>().release();
  return *q;
}

bool parseFlag(const char* name, const char* value, int maxValue, const char* message) {
  if (value == nullptr || value[0] == '\0') return false;
  for (int v = 0; v <= maxValue; ++v) {
    if (std::to_string(v) == value) return v != 0;
  }
  TORCH_CHECK(false, message, ", got ", name, "='", value, "'", NPU_ERROR_SUFFIX);
}

Config readConfig() {
  Config c;
  const char* tq = std::getenv("TASK_QUEUE_ENABLE");
  if (tq != nullptr && tq[0] != '\0') {
    if (std::strcmp(tq, "0") == 0) {
      c.mode = Mode::kDisabled;
    } else if (std::strcmp(tq, "1") == 0) {
      c.mode = Mode::kEnabled;
    } else if (std::strcmp(tq, "2") == 0) {
      c.mode = Mode::kBusyPoll;
    } else {
      TORCH_CHECK(false, "TASK_QUEUE_ENABLE should be 0, 1 or 2, got '", tq, "'", NPU_ERROR_SUFFIX);
    }
  }
  c.launchBlocking = parseFlag("ASCEND_LAUNCH_BLOCKING", std::getenv("ASCEND_LAUNCH_BLOCKING"), 1,
                               "ASCEND_LAUNCH_BLOCKING should be 0 or 1");
  c.perStreamQueue = parseFlag("PER_STREAM_QUEUE", std::getenv("PER_STREAM_QUEUE"), 1,
                               "PER_STREAM_QUEUE should be 0 or 1") &&
                     c.mode != Mode::kDisabled;
  return c;
}

// Builds a queue into `slot` unless another thread did. Takes the mutex.
Queue* createInto(std::atomic<Queue*>& slot, Queues& qs) {
  std::lock_guard<std::mutex> lock(qs.mutex);
  Queue* q = slot.load(std::memory_order_relaxed);
  if (q != nullptr) return q;
  qs.owned.push_back(std::make_unique<Queue>(config().mode == Mode::kBusyPoll));
  q = qs.owned.back().get();
  slot.store(q, std::memory_order_release);  // pairs with the acquire loads below
  return q;
}

// The queue that work for `stream` goes through, or nullptr for a direct
// launch (or, with create=false, if it does not exist yet). Raises for
// external streams that compat mode keeps out of a per-stream queue. See
// Note [Task queue routing].
Queue* queueFor(const NPUStream& stream, bool create = true) {
  const Config& c = config();
  if (!c.queued() || stream.isSyncLaunchStream()) return nullptr;
  const int device = stream.device_index();
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "Invalid device_index: ", device,
              NPU_ERROR_SUFFIX);
  Queues& qs = allQueues();
  std::atomic<Queue*>* slot = &qs.device[device];
  if (c.perStreamQueue) {
    if (stream.isExternal()) {
      TORCH_CHECK(external::mode() == external::Mode::kFull,
                  "External NPU stream is not supported by task queue enqueue.", NPU_ERROR_SUFFIX);
      std::lock_guard<std::mutex> lock(qs.mutex);
      auto key = std::make_pair(device, stream.id());
      auto it = qs.perExternalStream.find(key);
      if (it != qs.perExternalStream.end()) return it->second;
      if (!create) return nullptr;
      qs.owned.push_back(std::make_unique<Queue>(c.mode == Mode::kBusyPoll));
      return qs.perExternalStream.emplace(key, qs.owned.back().get()).first->second;
    }
    const auto id = static_cast<uint64_t>(stream.id());
    const uint64_t kind = id >> kStreamTypeBits;
    const uint64_t index = id & ((uint64_t{1} << kStreamTypeBits) - 1);
    TORCH_INTERNAL_ASSERT(kind < kKinds && index < kIndexesPerKind, "stream id ", stream.id(),
                          " outside the routing table (see Note [Task queue routing])");
    slot = &qs.perStream[device][kind * kIndexesPerKind + index];
  }
  Queue* q = slot->load(std::memory_order_acquire);
  if (q != nullptr || !create) return q;
  return createInto(*slot, qs);
}

void launchBlockingSync(npuStream_t raw, const char* name) {
  const npuError_t status = npuStreamSynchronize(raw);
  TORCH_CHECK(status == npuSuccess, name != nullptr ? name : "task",
              " failed: ", npuGetErrorName(status), ": ", npuGetLastErrorMessage(),
              NPU_ERROR_SUFFIX);
}

uint64_t pushOrRun(const NPUStream& stream, Item&& item) {
  Queue* q = nullptr;
  npuStream_t raw = nullptr;
  try {
    checkNotInBadFork();  // no consumer exists in such a child: Note [Fork]
    q = queueFor(stream);
    raw = stream.rawHandle();
  } catch (const c10::Error&) {
    // Raised to the caller: nothing ran, nothing is poisoned.
    if (item.kind == Item::Kind::kLaunch) releaseRefused(item.task, kRaisedToCaller);
    throw;
  }
  item.stream = raw;
  // Note [Correlation through the task queue]: read on the calling thread.
  if (profiler::collecting()) [[unlikely]]
    item.correlationId = profiler::currentId();
  if (q != nullptr) return q->push(std::move(item));
  // A direct launch: npurt's refusal is raised to this caller, now.
  const char* name = itemName(item);
  std::string error = submit(item);
  if (!error.empty()) {
    if (item.kind == Item::Kind::kLaunch) releaseRefused(item.task, kRaisedToCaller);
    TORCH_CHECK(false, "Failed to launch ", error, NPU_ERROR_SUFFIX);
  }
  // ASCEND_LAUNCH_BLOCKING=1 synchronizes after work and records, not after
  // a wait: a wait may legitimately precede its record (ExternalEvent), which
  // this same thread may be about to issue.
  if (config().launchBlocking && item.kind != Item::Kind::kWait) launchBlockingSync(raw, name);
  return 0;
}

}  // namespace

const Config& config() {
  // Not a function-local static of Config: a bad value must raise on every
  // call, not once and then leave a half-initialised static. c10::call_once:
  // one load once done (every launch reads the configuration).
  static c10::once_flag once;
  static Config c;
  static std::string error;
  c10::call_once(once, [] {
    try {
      c = readConfig();
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    }
  });
  TORCH_CHECK(error.empty(), error);
  return c;
}

void launch(const NPUStream& stream, const npuTask& task) {
  // A stream between graph_task_update_begin and _end collects its launches
  // (Note [Task-group updates] in csrc/core/graphs/NPUGraph.cpp).
  if (graphs::anyCapture() && graphs::collect(stream, task)) return;
  Item item;
  item.kind = Item::Kind::kLaunch;
  item.task = task;
  pushOrRun(stream, std::move(item));
}

uint64_t recordEvent(const NPUStream& stream, npuEvent_t event) {
  external::checkManagedOnly(stream, "the task queue's record event task");
  Item item;
  item.kind = Item::Kind::kRecord;
  item.event = event;
  return pushOrRun(stream, std::move(item));
}

void waitEvent(const NPUStream& stream, npuEvent_t event) {
  external::checkManagedOnly(stream, "the task queue's wait event task");
  Item item;
  item.kind = Item::Kind::kWait;
  item.event = event;
  pushOrRun(stream, std::move(item));
  // A wait may fork `stream` into a capture: see Note [Capture is visible at
  // enqueue] in csrc/core/graphs/CaptureRegistry.h.
  if (graphs::anyCapture()) waitSubmitted(stream);
}

void launchGraph(const NPUStream& stream, npuGraphExec_t exec) {
  external::checkManagedOnly(stream, "NPUGraph::replay");
  Item item;
  item.kind = Item::Kind::kGraph;
  item.exec = exec;
  pushOrRun(stream, std::move(item));
}

namespace {

// Note [Event destruction by ticket]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Records and waits of an event may still sit in any queue (another
// device's, or other streams' with PER_STREAM_QUEUE=1) when the event is
// destroyed, and npurt must not see the event die before them. So a destroy
// takes a snapshot of every queue's push count and waits, without blocking
// anyone, until each queue has submitted up to its snapshot: queues already
// there cost nothing, and nothing is pushed into any queue. Consumers check
// the waiting destroys after each batch they submit (one relaxed load when
// there are none).
struct PendingDestroy {
  npuEvent_t event;
  std::vector<std::pair<Queue*, uint64_t>> tickets;  // queue, push count at the destroy
};

struct PendingDestroys {
  std::mutex mutex;
  std::vector<PendingDestroy> list;  // guarded by mutex
  std::atomic<size_t> size{0};       // list.size(), readable without the lock
};

PendingDestroys& pendingDestroys() {
  static auto* p = std::make_unique<PendingDestroys>().release();  // leaked: see allQueues()
  return *p;
}

bool ready(const PendingDestroy& d) {
  for (const auto& [q, ticket] : d.tickets) {
    if (q->submittedCount() < ticket) return false;
  }
  return true;
}

void destroyReadyEvents() noexcept {
  PendingDestroys& p = pendingDestroys();
  // A consumer has just published its submitted count, a destroyer has just
  // listed its event: the fence (paired with the one in destroyEvent) makes
  // at least one of the two see the other's store, so no destroy is missed.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (p.size.load(std::memory_order_relaxed) == 0) return;
  std::vector<npuEvent_t> ready_events;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto keep = std::remove_if(p.list.begin(), p.list.end(), [&](const PendingDestroy& d) {
      if (!ready(d)) return false;
      ready_events.push_back(d.event);
      return true;
    });
    p.list.erase(keep, p.list.end());
    p.size.store(p.list.size(), std::memory_order_relaxed);
  }
  for (npuEvent_t e : ready_events) (void)npuEventDestroy(e);  // cannot fail usefully
}

}  // namespace

void destroyEvent(npuEvent_t event) noexcept {
  try {
    PendingDestroy pending{event, {}};
    {
      Queues& qs = allQueues();
      std::lock_guard<std::mutex> lock(qs.mutex);
      for (auto& owned : qs.owned) {
        const uint64_t pushed = owned->pushedCount();
        if (owned->submittedCount() < pushed) pending.tickets.emplace_back(owned.get(), pushed);
      }
    }
    if (!pending.tickets.empty()) {
      PendingDestroys& p = pendingDestroys();
      {
        std::lock_guard<std::mutex> lock(p.mutex);
        p.list.push_back(std::move(pending));
        p.size.store(p.list.size(), std::memory_order_relaxed);
      }
      destroyReadyEvents();  // a consumer may have passed its ticket meanwhile
      return;
    }
  } catch (...) {
    return;  // out of memory: leak the event rather than destroy it early
  }
  (void)npuEventDestroy(event);  // nothing queued can still name it
}

const std::string* failedLaunchMessage() noexcept { return tlsFailedLaunch; }

namespace {

// The queue that already holds work for `stream`, if any; nullptr for
// direct launches and for streams the queue refuses (external streams under
// PER_STREAM_QUEUE=1 in compat mode never enqueue, so nothing is pending).
Queue* existingQueueFor(const NPUStream& stream) {
  if (!config().queued() || stream.isSyncLaunchStream()) return nullptr;
  if (config().perStreamQueue && stream.isExternal() && external::mode() != external::Mode::kFull) {
    return nullptr;
  }
  return queueFor(stream, /*create=*/false);
}

std::vector<Queue*> queuesOfDevice(c10::DeviceIndex device) {
  std::vector<Queue*> targets;
  if (!config().queued() || device < 0 || device >= kMaxDevices) return targets;
  Queues& qs = allQueues();
  if (Queue* q = qs.device[device].load(std::memory_order_acquire)) targets.push_back(q);
  for (auto& slot : qs.perStream[device]) {
    if (Queue* q = slot.load(std::memory_order_acquire)) targets.push_back(q);
  }
  std::lock_guard<std::mutex> lock(qs.mutex);
  for (auto& [key, q] : qs.perExternalStream) {
    if (key.first == device) targets.push_back(q);
  }
  return targets;
}

}  // namespace

void drain(const NPUStream& stream) {
  if (Queue* q = existingQueueFor(stream)) q->drain(stream.rawHandle(), /*report=*/true);
}

void waitSubmitted(const NPUStream& stream) {
  if (Queue* q = existingQueueFor(stream)) q->drain(nullptr, /*report=*/false);
}

void drainDevice(c10::DeviceIndex device) {
  for (Queue* q : queuesOfDevice(device)) q->drain(nullptr, /*report=*/true);
}

void waitSubmittedDevice(c10::DeviceIndex device) noexcept {
  try {
    for (Queue* q : queuesOfDevice(device)) q->drain(nullptr, /*report=*/false);
  } catch (...) {
    // Only a bad configuration raises, and then nothing was ever queued.
  }
}

bool submitted(const NPUStream& stream, uint64_t ticket) {
  if (ticket == 0) return true;
  Queue* q = existingQueueFor(stream);
  return q == nullptr || q->submittedCount() >= ticket;
}

bool hasPending(const NPUStream& stream) {
  Queue* q = existingQueueFor(stream);
  return q != nullptr && q->hasPending();
}

const void* queueIdentity(const NPUStream& stream) {
  if (config().perStreamQueue && stream.isExternal() && external::mode() != external::Mode::kFull) {
    return nullptr;
  }
  return queueFor(stream);
}

}  // namespace c10_npu::queue
