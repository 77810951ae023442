// See NPUIpcEvent.h and Note [Inter-process events].
#include "core/NPUIpcEvent.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/ExternalStreams.h"
#include "core/NPUException.h"
#include "core/TaskQueue.h"
#include "core/graphs/CaptureRegistry.h"

namespace c10_npu {
namespace {

constexpr char kPageMagic[8] = {'N', 'P', 'U', 'I', 'P', 'C', 'E', 'V'};
constexpr char kHandleMagic[8] = {'N', 'P', 'U', 'S', 'I', 'M', 'E', 'V'};
constexpr uint32_t kHandleVersion = 1;
constexpr size_t kPageSize = 4096;
constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);

// The shared page. Counters are 32-bit so that a futex can wait on them.
struct SharedEvent {
  char magic[8];
  uint64_t token;
  std::atomic<uint32_t> recorded;
  std::atomic<uint32_t> completed;
  std::atomic<int32_t> lastRecorder;  // pid of the process that made the latest record
};
static_assert(sizeof(SharedEvent) <= kPageSize);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct HandleBytes {
  char magic[8];
  uint32_t version;
  int32_t pid;
  int32_t fd;
  uint32_t reserved;
  uint64_t token;
  char pad[32];
};
static_assert(sizeof(HandleBytes) == 64, "CUDA's IPC event handles are 64 bytes");

void futexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000);
  // Not FUTEX_PRIVATE: the word is shared with other processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

// Whether process `pid` is gone: no /proc entry, or a zombie that will never
// run again.
bool processGone(int32_t pid) {
  if (pid <= 0 || pid == getpid()) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return true;
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

// A capture would record the completion task once and run it at every replay,
// and a wait would bind to work outside the capture: both are refused.
void refuseCapture(const NPUStream& stream, const char* api) {
  TORCH_CHECK(!(graphs::anyCapture() && graphs::isCapturing(stream)), api,
              ": an interprocess event cannot be recorded or waited on by a stream that is "
              "capturing an NPU graph; use it before or after the capture.",
              NPU_ERROR_SUFFIX);
}

std::string goneMessage(int32_t pid) {
  return "the process that recorded the interprocess event (pid " + std::to_string(pid) +
         ") exited before the work it recorded completed";
}

}  // namespace

// The mapped page; the owner also keeps the memfd open for other processes.
struct IpcEventPage {
  SharedEvent* shared = nullptr;
  int ownedFd = -1;  // the owner's memfd, -1 in other processes

  IpcEventPage() = default;
  IpcEventPage(const IpcEventPage&) = delete;
  IpcEventPage& operator=(const IpcEventPage&) = delete;
  ~IpcEventPage() {
    if (shared != nullptr) munmap(shared, kPageSize);
    if (ownedFd >= 0) close(ownedFd);
  }

  // completed = max(completed, n), then wake every waiter.
  void complete(uint32_t n) noexcept {
    uint32_t seen = shared->completed.load(std::memory_order_acquire);
    while (seen < n &&
           !shared->completed.compare_exchange_weak(seen, n, std::memory_order_acq_rel)) {
    }
    futexWakeAll(shared->completed);
  }
  bool reached(uint32_t target) const noexcept {
    return shared->completed.load(std::memory_order_acquire) >= target;
  }
};

namespace {

// Maps the page of `fd`; closes `fd` if that fails (the caller keeps it otherwise).
std::shared_ptr<IpcEventPage> mapPage(int fd, const char* what) {
  void* p = mmap(nullptr, kPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, what, ": mapping the event's shared page failed: ", std::strerror(error),
                NPU_ERROR_SUFFIX);
  }
  auto page = std::make_shared<IpcEventPage>();
  page->shared = static_cast<SharedEvent*>(p);
  return page;
}

// The task a record queues: completes record `n` when the stream gets there,
// or when a failure of the stream discards it (the release).
struct RecordDone {
  std::shared_ptr<IpcEventPage> page;
  uint32_t n = 0;
  bool ran = false;
};

int runRecordDone(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  auto* done = static_cast<RecordDone*>(user);
  done->page->complete(done->n);
  done->ran = true;
  return 0;
}

void releaseRecordDone(void* user) {
  std::unique_ptr<RecordDone> done(static_cast<RecordDone*>(user));
  if (!done->ran) done->page->complete(done->n);  // discarded: no process may wait forever
}

// What a stream wait learns from the watcher: whether the recorder died.
struct WaitOutcome {
  std::atomic<bool> failed{false};
  int32_t recorder = 0;
};

// The task queued behind a stream's wait: fails the stream if the recorder
// died. It owns the helper event the wait names, destroyed by its release,
// which comes after the wait reached the runtime (same stream, later item).
struct WaitCheck {
  std::shared_ptr<WaitOutcome> outcome;
  npuEvent_t helper = nullptr;
};

int runWaitCheck(void* user, char* errorBuf, size_t errorBufSize) {
  const WaitOutcome& outcome = *static_cast<WaitCheck*>(user)->outcome;
  if (!outcome.failed.load(std::memory_order_acquire)) return 0;
  std::snprintf(errorBuf, errorBufSize, "Event.wait: %s", goneMessage(outcome.recorder).c_str());
  return 1;
}

void releaseWaitCheck(void* user) {
  std::unique_ptr<WaitCheck> check(static_cast<WaitCheck*>(user));
  (void)npuEventDestroy(check->helper);
}

// Completes the deferred records streams wait on when their targets are
// reached (or their recorders died). One thread per process, started by the
// first wait that has to wait; leaked with its state (it may run at exit).
class Watcher {
 public:
  struct Pending {
    std::shared_ptr<IpcEventPage> page;
    uint32_t target;
    npuDeferredRecord_t record;
    std::shared_ptr<WaitOutcome> outcome;
    std::chrono::steady_clock::time_point nextLivenessCheck;
  };

  static Watcher& get() {
    static Watcher* w = std::make_unique<Watcher>().release();
    return *w;
  }

  void add(Pending pending) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(pending));
    if (!started_) {
      std::thread([this] { loop(); }).detach();
      started_ = true;
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::vector<Pending> finished;
      std::shared_ptr<IpcEventPage> sleepOn;
      uint32_t sleepSeen = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !pending_.empty(); });
        const auto now = std::chrono::steady_clock::now();
        for (auto it = pending_.begin(); it != pending_.end();) {
          bool done = it->page->reached(it->target);
          if (!done && now >= it->nextLivenessCheck) {
            it->nextLivenessCheck = now + kLivenessPeriod;
            if (processGone(it->outcome->recorder)) {
              it->outcome->failed.store(true, std::memory_order_release);
              done = true;
            }
          }
          if (done) {
            finished.push_back(std::move(*it));
            it = pending_.erase(it);
          } else {
            ++it;
          }
        }
        if (!pending_.empty()) {
          sleepOn = pending_.front().page;
          sleepSeen = sleepOn->shared->completed.load(std::memory_order_acquire);
        }
      }
      for (Pending& p : finished) (void)npuEventCompleteDeferred(p.record);
      // Woken by a completion of the first pending event, or after 1 ms to
      // look at the others (and at the recorders' liveness).
      if (sleepOn != nullptr)
        futexWait(sleepOn->shared->completed, sleepSeen, std::chrono::milliseconds(1));
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Pending> pending_;
  bool started_ = false;
};

}  // namespace

NPUIpcEvent::NPUIpcEvent(c10::DeviceIndex device, std::shared_ptr<IpcEventPage> page) noexcept
    : device_(device), page_(std::move(page)) {}

NPUIpcEvent::~NPUIpcEvent() = default;

std::unique_ptr<NPUIpcEvent> NPUIpcEvent::create(c10::DeviceIndex device) {
  const int fd = memfd_create("npu-sim-ipc-event", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "Event(interprocess=True): memfd_create failed: ", std::strerror(errno),
              NPU_ERROR_SUFFIX);
  if (ftruncate(fd, kPageSize) != 0) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false,
                "Event(interprocess=True): sizing the shared page failed: ", std::strerror(error),
                NPU_ERROR_SUFFIX);
  }
  std::shared_ptr<IpcEventPage> page = mapPage(fd, "Event(interprocess=True)");
  page->ownedFd = fd;
  std::memcpy(page->shared->magic, kPageMagic, sizeof kPageMagic);
  page->shared->token = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  return std::make_unique<NPUIpcEvent>(device, std::move(page));
}

std::unique_ptr<NPUIpcEvent> NPUIpcEvent::open(c10::DeviceIndex device, const std::string& handle) {
  HandleBytes h{};
  TORCH_CHECK(handle.size() == sizeof h, "Event.from_ipc_handle: expected a ", sizeof h,
              "-byte handle from Event.ipc_handle(), got ", handle.size(), " bytes.",
              NPU_ERROR_SUFFIX);
  std::memcpy(&h, handle.data(), sizeof h);
  TORCH_CHECK(
      std::memcmp(h.magic, kHandleMagic, sizeof kHandleMagic) == 0 && h.version == kHandleVersion,
      "Event.from_ipc_handle: the bytes are not an event handle of this simulator "
      "(Event.ipc_handle() of an interprocess event makes one).",
      NPU_ERROR_SUFFIX);
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, "Event.from_ipc_handle: the event's process (pid ", h.pid,
              ") has exited or destroyed the event (", path, ": ", std::strerror(errno),
              "). Keep the event alive until every process opened its handle.", NPU_ERROR_SUFFIX);
  std::shared_ptr<IpcEventPage> page = mapPage(fd, "Event.from_ipc_handle");
  close(fd);  // the mapping keeps the page
  TORCH_CHECK(std::memcmp(page->shared->magic, kPageMagic, sizeof kPageMagic) == 0 &&
                  page->shared->token == h.token,
              "Event.from_ipc_handle: the event named by the handle no longer exists in process ",
              h.pid, " (its file now holds something else).", NPU_ERROR_SUFFIX);
  return std::make_unique<NPUIpcEvent>(device, std::move(page));
}

std::string NPUIpcEvent::handle() const {
  TORCH_CHECK(page_->ownedFd >= 0,
              "Event.ipc_handle: this event was opened from a handle; take the handle of the "
              "event in the process that created it.",
              NPU_ERROR_SUFFIX);
  HandleBytes h{};
  std::memcpy(h.magic, kHandleMagic, sizeof kHandleMagic);
  h.version = kHandleVersion;
  h.pid = getpid();
  h.fd = page_->ownedFd;
  h.token = page_->shared->token;
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

void NPUIpcEvent::record(const NPUStream& stream) {
  external::checkManagedOnly(stream, "Event.record");
  refuseCapture(stream, "Event.record");
  TORCH_CHECK(stream.device_index() == device_, "Event device ", static_cast<int>(device_),
              " does not match recording stream's device ", static_cast<int>(stream.device_index()),
              ".", NPU_ERROR_SUFFIX);
  auto done = std::make_unique<RecordDone>();
  done->page = page_;
  page_->shared->lastRecorder.store(getpid(), std::memory_order_relaxed);
  done->n = page_->shared->recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
  npuTask task{};
  task.name = "npuEventRecord (interprocess)";
  task.run = &runRecordDone;
  task.release = &releaseRecordDone;
  task.userData = done.release();  // queue::launch owns it from here on
  queue::launch(stream, task);
}

bool NPUIpcEvent::query() const {
  return page_->reached(page_->shared->recorded.load(std::memory_order_acquire));
}

void NPUIpcEvent::synchronize() const {
  const uint32_t target = page_->shared->recorded.load(std::memory_order_acquire);
  const int32_t recorder = page_->shared->lastRecorder.load(std::memory_order_relaxed);
  while (!page_->reached(target)) {
    const uint32_t seen = page_->shared->completed.load(std::memory_order_acquire);
    if (seen >= target) break;
    futexWait(page_->shared->completed, seen, kLivenessPeriod);
    TORCH_CHECK(page_->reached(target) || !processGone(recorder),
                "Event.synchronize: ", goneMessage(recorder), ".", NPU_ERROR_SUFFIX);
  }
}

void NPUIpcEvent::block(const NPUStream& stream) {
  external::checkManagedOnly(stream, "Event.wait");
  refuseCapture(stream, "Event.wait");
  const uint32_t target = page_->shared->recorded.load(std::memory_order_acquire);
  if (page_->reached(target)) return;  // nothing to wait for, now or later
  auto outcome = std::make_shared<WaitOutcome>();
  outcome->recorder = page_->shared->lastRecorder.load(std::memory_order_relaxed);
  auto check = std::make_unique<WaitCheck>();
  check->outcome = outcome;
  NPU_CHECK(npuEventCreateWithFlags(&check->helper, npuEventDisableTiming));
  npuDeferredRecord_t record = nullptr;
  if (const npuError_t status = npuEventRecordDeferred(check->helper, &record);
      status != npuSuccess) {
    (void)npuEventDestroy(check->helper);
    NPU_CHECK(status);
  }
  // The watcher completes the deferred record in every case; the wait and the
  // check follow it on the stream.
  Watcher::get().add(Watcher::Pending{page_, target, record, std::move(outcome),
                                      std::chrono::steady_clock::now() + kLivenessPeriod});
  const npuEvent_t helper = check->helper;
  try {
    queue::waitEvent(stream, helper);
  } catch (...) {
    (void)npuEventDestroy(helper);
    throw;
  }
  npuTask task{};
  task.name = "Event.wait (interprocess) check";
  task.run = &runWaitCheck;
  task.release = &releaseWaitCheck;
  task.userData = check.release();  // owned by the launch from here on, the helper with it
  queue::launch(stream, task);
}

}  // namespace c10_npu
