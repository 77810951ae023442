// See TaskQueue.h and Note [Task queue drain rule].
#include "core/TaskQueue.h"

#if defined(__linux__)
#include <pthread.h>
#endif

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"

namespace c10_npu::queue {
namespace {

constexpr int kMaxDevices = 32;

struct Item {
  enum class Kind : uint8_t { kLaunch, kRecord, kWait, kDestroyEvent };
  Kind kind = Kind::kLaunch;
  npuStream_t stream = nullptr;
  npuTask task{};              // kLaunch
  npuEvent_t event = nullptr;  // kRecord, kWait, kDestroyEvent
  // kDestroyEvent: one item per queue; the consumer that takes the count to
  // zero destroys the event.
  std::shared_ptr<std::atomic<int>> remaining;
};

const char* itemName(const Item& item) {
  switch (item.kind) {
    case Item::Kind::kLaunch:
      return item.task.name != nullptr ? item.task.name : "task";
    case Item::Kind::kRecord:
      return "event record";
    case Item::Kind::kWait:
      return "event wait";
    case Item::Kind::kDestroyEvent:
      return "event destroy";
  }
  return "task";
}

// Submits one item to npurt; returns the failure message or "". Owns the
// item's task: releases it if npurt refused it.
std::string submit(Item& item) {
  npuError_t status = npuSuccess;
  switch (item.kind) {
    case Item::Kind::kLaunch:
      status = npuLaunchTask(item.stream, &item.task);
      if (status != npuSuccess && item.task.release != nullptr) {
        item.task.release(item.task.userData);
      }
      break;
    case Item::Kind::kRecord:
      status = npuEventRecord(item.event, item.stream);
      break;
    case Item::Kind::kWait:
      status = npuStreamWaitEvent(item.stream, item.event, 0);
      break;
    case Item::Kind::kDestroyEvent:
      // acq_rel: the last consumer must see the others' submissions.
      if (item.remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) {
        (void)npuEventDestroy(item.event);  // a destroy cannot fail usefully
      }
      break;
  }
  if (status == npuSuccess) return {};
  return std::string(itemName(item)) + ": " + npuGetErrorName(status) + ": " +
         npuGetLastErrorMessage();
}

[[noreturn]] void raiseConsumerError(const std::string& error) {
  TORCH_CHECK(false, "The task queue failed to launch ", error,
              ". Since operators are launched asynchronously, the Python stack trace may not "
              "point at the failing operator; set ASCEND_LAUNCH_BLOCKING=1 to get an exact one.",
              NPU_ERROR_SUFFIX);
}

// One producer/consumer queue. Producers push under a mutex (short critical
// section: a vector push_back); the consumer swaps the whole batch out and
// submits it without holding the lock, so producers never wait for npurt.
class Queue {
 public:
  explicit Queue(bool busyPoll) : busyPoll_(busyPoll), consumer_([this] { consumerLoop(); }) {}

  // Never destroyed: see allQueues(). Declared for completeness.
  ~Queue() = default;

  // Returns the item's ticket (1, 2, ...): it is submitted once
  // submittedCount() reaches it.
  uint64_t push(Item&& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!error_.empty()) {
      std::string error = std::exchange(error_, {});
      lock.unlock();
      releaseItem(item);
      raiseConsumerError(error);
    }
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

  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = pushed_;
    if (submitted_ < target) {
      ++drainWaiters_;
      doneCv_.wait(lock, [&] { return submitted_ >= target; });
      --drainWaiters_;
    }
    if (!error_.empty()) raiseConsumerError(std::exchange(error_, {}));
  }

  bool hasPending() {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_ < pushed_;
  }

 private:
  static void releaseItem(Item& item) {
    if (item.kind == Item::Kind::kLaunch && item.task.release != nullptr) {
      item.task.release(item.task.userData);
    }
  }

  void consumerLoop() {
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), "npu taskqueue");  // for top -H, perf, debuggers
#endif
    std::vector<Item> batch;
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
      std::string firstError;
      for (Item& item : batch) {
        std::string error = submit(item);
        if (!error.empty() && firstError.empty()) firstError = std::move(error);
      }
      const uint64_t n = batch.size();
      batch.clear();
      std::lock_guard<std::mutex> lock(mutex_);
      submitted_ += n;
      submittedPublished_.store(submitted_, std::memory_order_release);
      if (!firstError.empty() && error_.empty()) error_ = std::move(firstError);
      if (drainWaiters_ > 0) doneCv_.notify_all();
    }
  }

  // Note [Task queue consumer linger]
  // A host thread launching ops back to back pushes every few microseconds,
  // and the consumer submits a push in less than that. If the consumer went
  // to sleep as soon as the queue was empty, nearly every push would find it
  // asleep and pay a futex wake-up (a system call, and a context switch for
  // the consumer), which was most of a tiny op's host latency. So before it
  // sleeps the consumer watches pending_ for kLinger, yielding its core
  // between looks so that on a machine with few cores the producer it waits
  // for can run. TASK_QUEUE_ENABLE=2 watches without a deadline (busy poll).
  // acquire pairs with the release in push() (the lock taken afterwards
  // orders the items anyway).
  static constexpr std::chrono::nanoseconds kLinger{50'000};
  void watchForWork() const {
    const auto deadline = busyPoll_ ? std::chrono::steady_clock::time_point::max()
                                    : std::chrono::steady_clock::now() + kLinger;
    while (!pending_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }

  const bool busyPoll_;
  std::mutex mutex_;
  std::condition_variable workCv_;  // consumer sleeps here
  std::condition_variable doneCv_;  // drainers sleep here
  std::vector<Item> items_;         // guarded by mutex_
  uint64_t pushed_ = 0;             // guarded by mutex_
  uint64_t submitted_ = 0;          // guarded by mutex_
  bool consumerWaiting_ = false;    // guarded by mutex_
  int drainWaiters_ = 0;            // guarded by mutex_
  std::string error_;               // guarded by mutex_; first consumer failure
  std::atomic<bool> pending_{false};
  std::atomic<uint64_t> submittedPublished_{0};  // submitted_, readable without the lock
  std::thread consumer_;                         // last member: starts after the rest exist
};

// Queues are created lazily and leaked on purpose: their consumer threads may
// be blocked at process exit, and joining or destroying them from a static
// destructor would race with npurt's own shutdown. See Note [Shutdown order]
// in csrc/npurt/README.md.
struct Queues {
  std::mutex mutex;
  std::array<Queue*, kMaxDevices> device{};
  std::map<std::pair<int, c10::StreamId>, Queue*> perStream;
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

// The queue that work for `stream` goes through, or nullptr for a direct
// launch. Raises for external streams that compat mode keeps out of a
// per-stream queue.
Queue* queueFor(const NPUStream& stream, bool create = true) {
  const Config& c = config();
  if (!c.queued() || stream.isSyncLaunchStream()) return nullptr;
  const int device = stream.device_index();
  Queues& qs = allQueues();
  if (c.perStreamQueue) {
    TORCH_CHECK(!stream.isExternal() || external::mode() == external::Mode::kFull,
                "External NPU stream is not supported by task queue enqueue.", NPU_ERROR_SUFFIX);
    std::lock_guard<std::mutex> lock(qs.mutex);
    auto key = std::make_pair(device, stream.id());
    auto it = qs.perStream.find(key);
    if (it != qs.perStream.end()) return it->second;
    if (!create) return nullptr;
    qs.owned.push_back(std::make_unique<Queue>(c.mode == Mode::kBusyPoll));
    return qs.perStream.emplace(key, qs.owned.back().get()).first->second;
  }
  std::lock_guard<std::mutex> lock(qs.mutex);
  Queue*& q = qs.device[device];
  if (q == nullptr && create) {
    qs.owned.push_back(std::make_unique<Queue>(c.mode == Mode::kBusyPoll));
    q = qs.owned.back().get();
  }
  return q;
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
    q = queueFor(stream);
    raw = stream.rawHandle();
  } catch (...) {
    if (item.kind == Item::Kind::kLaunch && item.task.release != nullptr) {
      item.task.release(item.task.userData);
    }
    throw;
  }
  item.stream = raw;
  if (q != nullptr) return q->push(std::move(item));
  const char* name = itemName(item);
  std::string error = submit(item);
  TORCH_CHECK(error.empty(), "Failed to launch ", error, NPU_ERROR_SUFFIX);
  if (config().launchBlocking) launchBlockingSync(raw, name);
  return 0;
}

}  // namespace

const Config& config() {
  // Not a function-local static of Config: a bad value must raise on every
  // call, not once and then leave a half-initialised static.
  static std::once_flag once;
  static Config c;
  static std::string error;
  std::call_once(once, [] {
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
}

void destroyEvent(npuEvent_t event) noexcept {
  std::vector<Queue*> targets;
  try {
    Queues& qs = allQueues();
    std::lock_guard<std::mutex> lock(qs.mutex);
    for (auto& owned : qs.owned) targets.push_back(owned.get());
  } catch (...) {
    targets.clear();
  }
  if (targets.empty()) {
    (void)npuEventDestroy(event);  // no queue exists: nothing can still name it
    return;
  }
  auto remaining = std::make_shared<std::atomic<int>>(static_cast<int>(targets.size()));
  for (Queue* q : targets) {
    Item item;
    item.kind = Item::Kind::kDestroyEvent;
    item.event = event;
    item.remaining = remaining;
    try {
      q->push(std::move(item));
    } catch (...) {
      // push raised a stored consumer error: count this queue as done so the
      // event is still destroyed exactly once.
      if (remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) (void)npuEventDestroy(event);
    }
  }
}

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

}  // namespace

void drain(const NPUStream& stream) {
  if (Queue* q = existingQueueFor(stream)) q->drain();
}

void drainDevice(c10::DeviceIndex device) {
  if (!config().queued()) return;
  std::vector<Queue*> targets;
  {
    Queues& qs = allQueues();
    std::lock_guard<std::mutex> lock(qs.mutex);
    if (device >= 0 && device < kMaxDevices && qs.device[device] != nullptr) {
      targets.push_back(qs.device[device]);
    }
    for (auto& [key, q] : qs.perStream) {
      if (key.first == device) targets.push_back(q);
    }
  }
  for (Queue* q : targets) q->drain();
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
