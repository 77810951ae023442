// Executor: worker threads, ready queue, and the per-stream run loop.
// See executor.h and Note [Stream ownership] in stream.h.
#include "executor.h"

#if defined(__linux__)
#include <pthread.h>
#endif

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>

#include "clock.h"
#include "event.h"
#include "fault.h"
#include "racecheck/racecheck.h"
#include "trace.h"

namespace npurt::internal {

Executor::Executor(int device, int cores, Trace& trace, const std::atomic<uint32_t>& globalDelayUs)
    : device_(device),
      cores_(cores),
      trace_(trace),
      globalDelayUs_(globalDelayUs),
      utilization_(cores) {
  sleepers_.reserve(static_cast<size_t>(cores_));
  for (int i = 0; i < cores_; ++i) sleepers_.push_back(std::make_unique<Sleeper>());
  sleeping_.reserve(static_cast<size_t>(cores_));
}

Executor::~Executor() { stop(); }

void Executor::start() {
  // acquire: pairs with the release below, for threads_ and the workers.
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> startLock(startMutex_);
  if (started_.load(std::memory_order_relaxed)) return;
  if (stopping_.load(std::memory_order_relaxed)) return;  // shut down already
  threads_.reserve(static_cast<size_t>(cores_));
  try {
    for (int i = 0; i < cores_; ++i) {
      threads_.emplace_back([this, i] { workerLoop(i); });
#if defined(__linux__)
      // "npurt d<device> w<worker>", for top -H, perf and debuggers (Linux
      // allows 15 characters; a longer name is cut, which is harmless).
      // Named here, not by the worker itself, so that the name is there as
      // soon as the runtime is, even for a worker not yet scheduled.
      char name[32];
      std::snprintf(name, sizeof name, "npurt d%d w%d", device_, i);
      name[15] = '\0';
      (void)pthread_setname_np(threads_.back().native_handle(), name);
#endif
    }
  } catch (...) {
    // Exception-safe start (Note [Executor thread start]): stop and join
    // what started, leave the executor startable again, rethrow.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true, std::memory_order_relaxed);
    }
    wakeAll();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(false, std::memory_order_relaxed);
      sleeping_.clear();
      for (const std::unique_ptr<Sleeper>& sleeper : sleepers_) sleeper->exited = false;
    }
    throw;
  }
  started_.store(true, std::memory_order_release);
}

void Executor::schedule(std::shared_ptr<Stream> stream) noexcept {
  const int level = stream->level();
  int wake = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_.load(std::memory_order_relaxed)) return;
    wake = takeSleeperFor(*stream);
    ready_[level].push(std::move(stream));
    readyMask_.store(readyMask_.load(std::memory_order_relaxed) | (1u << level),
                     std::memory_order_relaxed);
  }
  // Outside the lock so the woken worker does not block on it. No lost
  // wake-up: a worker puts itself on sleeping_ under the mutex after finding
  // the queue empty, so it either saw our stream or is woken here.
  if (wake >= 0) sleepers_[static_cast<size_t>(wake)]->cv.notify_one();
}

int Executor::takeSleeperFor(const Stream& stream) noexcept {
  if (sleeping_.empty()) return -1;
  // Note [Worker wake order]: the stream's last worker if it sleeps, else
  // the worker that fell asleep last.
  const int last = stream.lastWorker();
  auto it = std::find(sleeping_.begin(), sleeping_.end(), last);
  if (it == sleeping_.end()) it = sleeping_.end() - 1;
  const int worker = *it;
  sleeping_.erase(it);
  sleepers_[static_cast<size_t>(worker)]->woken = true;
  return worker;
}

void Executor::wakeAll() noexcept {
  for (const std::unique_ptr<Sleeper>& sleeper : sleepers_) sleeper->cv.notify_all();
}

void Executor::stop(uint64_t deadlineNs) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_relaxed);
  }
  {
    // Taking delayMutex_ orders the store before any delay wait's predicate
    // check, so an interrupted delay cannot miss the notification.
    std::lock_guard<std::mutex> lock(delayMutex_);
  }
  delayCv_.notify_all();
  wakeAll();
  std::lock_guard<std::mutex> startLock(startMutex_);
  const std::thread::id self = std::this_thread::get_id();
  {
    // Wait (boundedly) for every worker to return from its task. exit()
    // called from a task runs the shutdown hook on a worker thread, which
    // cannot wait for itself.
    std::unique_lock<std::mutex> lock(mutex_);
    const auto allExited = [&] {
      for (size_t i = 0; i < threads_.size(); ++i) {
        if (!sleepers_[i]->exited && threads_[i].get_id() != self) return false;
      }
      return true;
    };
    if (deadlineNs == UINT64_MAX) {
      exitCv_.wait(lock, allExited);
    } else {
      const std::chrono::steady_clock::time_point deadline{std::chrono::nanoseconds(deadlineNs)};
      exitCv_.wait_until(lock, deadline, allExited);
    }
    for (size_t i = 0; i < threads_.size(); ++i) {
      Sleeper& sleeper = *sleepers_[i];
      sleeper.abandoned = !sleeper.exited && threads_[i].get_id() != self;
    }
  }
  for (size_t i = 0; i < threads_.size(); ++i) {
    std::thread& thread = threads_[i];
    if (!thread.joinable()) continue;
    bool abandoned = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      abandoned = sleepers_[i]->abandoned;
    }
    // Ourselves, or stuck in a task past the deadline: let it go (it only
    // touches the leaked runtime, Note [Runtime lifetime]).
    if (abandoned || thread.get_id() == self) {
      thread.detach();
    } else {
      thread.join();
    }
  }
  threads_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  sleeping_.clear();
  for (StreamList& list : ready_) list.clear();
  readyMask_.store(0, std::memory_order_relaxed);
}

bool Executor::ranByAbandonedWorker(const Stream* stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::unique_ptr<Sleeper>& sleeper : sleepers_) {
    if (sleeper->abandoned && sleeper->running == stream) return true;
  }
  return false;
}

void Executor::workerLoop(int self) noexcept {
  while (std::shared_ptr<Stream> stream = takeReady(self)) {
    utilization_.beginBusy(self, nowNs());  // Note [Device utilization]
    runStream(std::move(stream), self);
    utilization_.endBusy(self, nowNs());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sleepers_[static_cast<size_t>(self)]->exited = true;
  }
  exitCv_.notify_all();  // the executor is never destroyed (Note [Runtime lifetime])
}

std::shared_ptr<Stream> Executor::takeReady(int self) noexcept {
  Sleeper& sleeper = *sleepers_[static_cast<size_t>(self)];
  std::unique_lock<std::mutex> lock(mutex_);
  sleeper.running = nullptr;  // done with the last one
  for (;;) {
    if (stopping_.load(std::memory_order_relaxed)) return nullptr;
    const unsigned mask = readyMask_.load(std::memory_order_relaxed);
    if (mask != 0) {
      const int level = std::countr_zero(mask);  // lowest level = highest priority
      std::shared_ptr<Stream> stream = ready_[level].pop();
      if (ready_[level].empty()) {
        readyMask_.store(mask & ~(1u << level), std::memory_order_relaxed);
      }
      sleeper.running = stream.get();  // for an abandoning stop()
      return stream;
    }
    sleeper.woken = false;
    sleeping_.push_back(self);  // capacity reserved: no allocation
    sleeper.cv.wait(lock,
                    [&] { return sleeper.woken || stopping_.load(std::memory_order_relaxed); });
    // Woken by schedule() (which took us off sleeping_) or by stop() (which
    // clears sleeping_ after joining).
  }
}

void Executor::backOff(unsigned& misses) noexcept {
  // The producer that owes us a task is a few instructions from publishing
  // it, unless it was preempted; on a loaded machine that can last a time
  // slice. Yield, then sleep, so that we do not burn the CPU it needs.
  ++misses;
  if (misses <= 64) return;  // the caller's pauses are enough
  if (misses <= 256) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool Executor::awaitWork(Stream& stream, InlineTask& task, int self) noexcept {
  TaskQueue& queue = stream.queue();
  // Everything published has finished: wake npuStreamSynchronize callers if
  // that was everything (reads the tail word only if somebody waits).
  stream.notifyIdle();
  const uint64_t lingerStart = nowNs();
  utilization_.endBusy(self, lingerStart);  // lingering is idle time
  const uint64_t deadline = lingerStart + kLingerNs;
  auto found = [&] {
    utilization_.beginBusy(self, nowNs());
    return true;
  };
  unsigned misses = 0;  // looks at a ticket taken but not published
  for (unsigned look = 1;; ++look) {
    // Look rarely, and at the entry the next task goes to, not at the tail
    // word: every look takes a line the producers write away from them, and
    // a look per task would make each enqueue wait for a cache-line
    // transfer. Between looks they fill the ring undisturbed; we then drain
    // a batch. Spinning, not yielding: a host thread that polls for the
    // result of the next task may share our core, and a yield would hand it
    // the rest of its time slice while its work waits for us.
    spinFor(kLookIntervalNs);
    if (queue.front(task) == TaskQueue::Front::kReady) return found();
    if (stopping_.load(std::memory_order_relaxed)) return false;  // shutdown discards the rest
    const bool giveUp = readyMask_.load(std::memory_order_relaxed) != 0 ||
                        ((look & 7u) == 0 && nowNs() >= deadline);
    // Every 8th look, and before giving up, ask the tail word why nothing
    // is published (overflow list, a late producer, or nothing at all).
    if (!giveUp && (look & 7u) != 0) continue;
    switch (queue.poll(task)) {
      case TaskQueue::Front::kReady:
        return found();
      case TaskQueue::Front::kPending:
        backOff(misses);  // cannot release: a producer holds the next ticket
        break;
      default:                                           // kEmpty
        if (giveUp && queue.tryRelease()) return false;  // released: not ours any more
        break;
    }
  }
}

uint64_t Executor::keepDistance(const TaskQueue& queue, bool fresh) noexcept {
  // See Note [Consumer distance] in executor.h.
  const uint64_t head = queue.head();
  uint64_t ahead = queue.enqueued() - head;
  if (!fresh) {
    // The producers are right behind us: let them get ahead, for as long as
    // they make progress (a producer slowed down by our reads must not keep
    // us in lockstep with it); when they stop, run what there is.
    for (int i = 0; i < kDistanceWaits && ahead < kDistance; ++i) {
      yieldFor(kLookIntervalNs);
      const uint64_t before = ahead;
      ahead = queue.enqueued() - head;
      if (ahead == before) break;  // no progress: they stopped
    }
  }
  // A producer that is still going keeps a margin of tasks that we do not
  // read yet: reading right up to its newest entry lets our prefetcher run
  // into the lines it is writing (Note [Consumer distance]).
  if (!fresh && ahead >= kDistance) return head + ahead - kMargin;
  return head + std::max<uint64_t>(ahead, 1);
}

void Executor::runStream(std::shared_ptr<Stream> stream, int self) noexcept {
  Stream& s = *stream;
  s.setLastWorker(self);  // Note [Worker wake order]
  TaskQueue& queue = s.queue();
  // Levels numbered below ours are of higher priority.
  const unsigned higher = (1u << s.level()) - 1u;
  int batch = 0;
  uint64_t runUntil = 0;  // ticket up to which we run without looking ahead
  bool fresh = true;      // nothing run yet since we took the stream
  for (;;) {
    // Note [Shutdown order]: what is left is discarded by the shutdown.
    if (stopping_.load(std::memory_order_relaxed)) return;
    if (queue.head() >= runUntil) {
      runUntil = keepDistance(queue, fresh);
      fresh = false;
    }
    InlineTask task;
    // Hot path: the next task is normally published already.
    if (queue.front(task) != TaskQueue::Front::kReady) {
      if (!awaitWork(s, task, self)) return;
      // We had caught up and waited: what arrived meanwhile runs at once
      // (a latency-bound host loop must not pay the distance wait).
      runUntil = 0;
      fresh = true;
    }
    if (task.taskKind() == TaskKind::kEventWait) {
      EventVersion& version = static_cast<EventWaitTask*>(task.node)->version();
      // The wait stays at the front while parked; the executor that resumes
      // the stream finds it there again, with the version done.
      if (!version.done()) {
        if (trace_.enabled()) [[unlikely]]
          s.noteWaitBlocked(nowNs());  // the wait's record starts here
        if (version.parkUnlessDone(stream)) return;  // `stream` moved away
      }
      if (racecheck::enabled()) [[unlikely]]
        racecheck::onWait(s, version);
    }
    execute(s, task);
    s.afterTask();  // wakes synchronize callers whose work has finished
    if (++batch >= kBatchSize || (readyMask_.load(std::memory_order_relaxed) & higher) != 0) {
      batch = 0;
      if (readyMask_.load(std::memory_order_relaxed) != 0) {
        // Others are waiting for a core: requeue behind them (FIFO within a
        // level; a higher level is taken first anyway). We still own the
        // stream; whoever takes it next releases it if it is empty.
        schedule(std::move(stream));
        return;
      }
    }
  }
}

unsigned Executor::utilizationPercent() const noexcept { return utilization_.percent(nowNs()); }

namespace {
std::atomic<uint64_t> gOpTimeoutUs{0};  // npuSetOpExecuteTimeout
}  // namespace

void setOpExecuteTimeoutUs(uint64_t us) noexcept {
  gOpTimeoutUs.store(us, std::memory_order_relaxed);
}

uint64_t opExecuteTimeoutUs() noexcept { return gOpTimeoutUs.load(std::memory_order_relaxed); }

int Executor::checkTimeout(uint64_t startNs, uint64_t timeoutUs, char* errorBuf,
                           size_t errorBufSize) noexcept {
  const uint64_t ranUs = (nowNs() - startNs) / 1000;
  if (ranUs <= timeoutUs) return 0;
  std::snprintf(errorBuf, errorBufSize,
                "op execution timed out: the task ran for %llu us, longer than the op execution "
                "timeout of %llu us (torch_npu.npu.set_op_timeout_ms, npuSetOpExecuteTimeout)",
                static_cast<unsigned long long>(ranUs), static_cast<unsigned long long>(timeoutUs));
  return 1;
}

bool Executor::delayTask(uint64_t us) noexcept {
  std::unique_lock<std::mutex> lock(delayMutex_);
  const bool stopped = delayCv_.wait_for(lock, std::chrono::microseconds(us), [this] {
    return stopping_.load(std::memory_order_relaxed);
  });
  return !stopped;
}

void Executor::completeRecord(Stream& stream, InlineTask& task) noexcept {
  auto* record = static_cast<EventRecordTask*>(task.node);
  EventVersion& version = record->version();
  const uint64_t start = nowNs();
  // Note [Completion order] in event.h: timestamp, then the stream's
  // finished count (which already completes the version for readers that
  // look at it, and makes the stream idle if this was its last task), then
  // the version's own flag, host waiters and parked streams.
  if (racecheck::enabled()) [[unlikely]]
    racecheck::onRecord(stream, version);  // before anyone can see it done
  version.stamp(start);
  stream.queue().pop();
  version.markDone();
  if (trace_.enabled()) {
    trace_.record(TraceRecord{device_, stream.id(), task.name(), npuActivityKindEventRecord,
                              task.externalId, task.enqueueNs, start, nowNs(), false});
  }
  task.dispose();
}

void Executor::execute(Stream& stream, InlineTask& task) noexcept {
  const TaskKind kind = task.taskKind();
  if (kind == TaskKind::kEventRecord) {
    completeRecord(stream, task);
    return;
  }
  const bool isWork = kind == TaskKind::kWork;
  // Note [Task failure rule]: work (and graph launch control) reaching the
  // head of a failed stream is discarded; records and waits complete
  // normally.
  if ((isWork || kind == TaskKind::kControl) && stream.hasFailure()) {
    if (racecheck::enabled()) [[unlikely]]
      racecheck::discardTask(stream);
    task.discard();
    task.dispose();
    stream.queue().pop();
    return;
  }
  const bool tracing = trace_.enabled();
  uint64_t start = tracing ? nowNs() : 0;
  if (kind == TaskKind::kEventWait) {
    // A wait that blocked the stream spans the time it was blocked.
    const uint64_t blocked = stream.takeWaitBlockedNs();
    if (tracing && blocked != 0) start = blocked;
  }
  // Note [Op execution timeout]: the simulated delay is part of the run.
  const uint64_t timeoutUs = isWork ? opExecuteTimeoutUs() : 0;
  const uint64_t runStartNs = timeoutUs != 0 ? nowNs() : 0;
  if (isWork) {
    // Note [Task delay]: the per-stream override wins over the global delay.
    const int64_t streamDelay = stream.delayOverrideUs();
    const uint64_t us = streamDelay >= 0 ? static_cast<uint64_t>(streamDelay)
                                         : globalDelayUs_.load(std::memory_order_relaxed);
    if (us != 0 && !delayTask(us)) {
      // Shutdown during the delay: the task never started. Left at the
      // front, the shutdown discards it with the rest.
      return;
    }
  }
  char errorBuf[kErrorBufSize];
  errorBuf[0] = '\0';
  int status = 0;
  bool injected = false;
  const bool checking = racecheck::enabled();
  if (isWork && faults().fires(FaultKind::kTask)) [[unlikely]] {
    // Note [Fault injection]: fails as the task itself would, without
    // running it (its release is still called, as for a discarded task).
    std::snprintf(errorBuf, sizeof errorBuf, "%s", kInjectedFault);
    status = 1;
    injected = true;
  } else if (checking && !racecheck::beforeTask(stream, task, errorBuf, sizeof errorBuf))
      [[unlikely]] {
    // A race in npuRaceCheckError mode: fails like an injected fault, with
    // the report as its message (Note [Happens-before model]).
    status = 1;
    injected = true;
  } else {
    status = task.run(errorBuf, sizeof errorBuf);
    if (status == 0 && timeoutUs != 0) [[unlikely]]
      status = checkTimeout(runStartNs, timeoutUs, errorBuf, sizeof errorBuf);
  }
  if (checking) [[unlikely]]
    racecheck::afterTask(stream);
  errorBuf[sizeof errorBuf - 1] = '\0';  // a task may fill the buffer without a NUL
  // The failure is recorded before the pop, so a stream seen idle has its
  // failure visible (npuStreamQuery relies on this).
  if (status != 0) stream.recordFailure(task.name(), errorBuf);
  // Released after the failure is recorded, so that its release sees the
  // failure it is discarded for (npuStreamPeekAtLastError), as for any task
  // discarded behind a failure.
  if (injected) task.discard();
  if (tracing) {
    trace_.record(TraceRecord{device_, stream.id(), task.name(), task.activityKind(),
                              task.externalId, task.enqueueNs, start, nowNs(), status != 0});
  }
  // Disposed before the pop: a node's references (device allocations) are
  // gone by the time the stream is seen idle.
  task.dispose();
  stream.queue().pop();
}

}  // namespace npurt::internal
