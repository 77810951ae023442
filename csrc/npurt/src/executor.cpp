// Executor: worker threads, ready queue, and the per-stream run loop.
// See executor.h and Note [Pending count] in stream.h.
#include "executor.h"

#include <bit>
#include <chrono>

#include "clock.h"
#include "event.h"
#include "trace.h"

namespace npurt::internal {

Executor::Executor(int device, int cores, Trace& trace, const std::atomic<uint32_t>& globalDelayUs)
    : device_(device), cores_(cores), trace_(trace), globalDelayUs_(globalDelayUs) {}

Executor::~Executor() { stop(); }

void Executor::start() {
  // acquire: pairs with the release below, for threads_ and the workers.
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> startLock(startMutex_);
  if (started_.load(std::memory_order_relaxed)) return;
  if (stopping_.load(std::memory_order_relaxed)) return;  // shut down already
  threads_.reserve(static_cast<size_t>(cores_));
  try {
    for (int i = 0; i < cores_; ++i) threads_.emplace_back([this] { workerLoop(); });
  } catch (...) {
    // Exception-safe start (Note [Executor thread start]): stop and join
    // what started, leave the executor startable again, rethrow.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true, std::memory_order_relaxed);
    }
    workCv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(false, std::memory_order_relaxed);
    }
    throw;
  }
  started_.store(true, std::memory_order_release);
}

void Executor::schedule(std::shared_ptr<Stream> stream) noexcept {
  const int level = stream->level();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_.load(std::memory_order_relaxed)) return;
    ready_[level].push(std::move(stream));
    readyMask_.store(readyMask_.load(std::memory_order_relaxed) | (1u << level),
                     std::memory_order_relaxed);
    wake = sleepers_ > 0;
  }
  // Outside the lock so the woken worker does not block on it. No lost
  // wake-up: a worker increments sleepers_ under the mutex after finding the
  // queue empty, so it either saw our stream or is counted here.
  if (wake) workCv_.notify_one();
}

void Executor::stop() noexcept {
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
  workCv_.notify_all();
  std::lock_guard<std::mutex> startLock(startMutex_);
  for (std::thread& thread : threads_) {
    if (!thread.joinable()) continue;
    // exit() called from a task runs the shutdown hook on a worker thread,
    // which cannot join itself.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
  threads_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  for (StreamList& list : ready_) list.clear();
  readyMask_.store(0, std::memory_order_relaxed);
}

void Executor::workerLoop() noexcept {
  while (std::shared_ptr<Stream> stream = takeReady()) runStream(std::move(stream));
}

std::shared_ptr<Stream> Executor::takeReady() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping_.load(std::memory_order_relaxed)) return nullptr;
    const unsigned mask = readyMask_.load(std::memory_order_relaxed);
    if (mask != 0) {
      const int level = std::countr_zero(mask);  // lowest level = highest priority
      std::shared_ptr<Stream> stream = ready_[level].pop();
      if (ready_[level].empty()) {
        readyMask_.store(mask & ~(1u << level), std::memory_order_relaxed);
      }
      return stream;
    }
    ++sleepers_;
    workCv_.wait(lock);
    --sleepers_;
  }
}

uint64_t Executor::retire(Stream& stream, uint64_t finished) noexcept {
  if (finished == 0) return stream.pending().load(std::memory_order_acquire) & Stream::kCountMask;
  // seq_cst: release publishes the finished tasks' effects to idle() readers
  // and to the next owner; seq_cst also orders it before notifyIdle's load
  // of the waiter count (Dekker pair with Stream::waitIdle).
  const uint64_t now = stream.pending().fetch_sub(finished, std::memory_order_seq_cst) - finished;
  const uint64_t count = now & Stream::kCountMask;
  if (count == 0) stream.notifyIdle();
  return count;
}

void Executor::backOff(unsigned& misses) noexcept {
  // The producer that owes us a node is a few instructions from linking it,
  // unless it was preempted; on a loaded machine that can last a time slice.
  // Spin briefly, then yield, then sleep, so that we do not burn the CPU the
  // producer needs to finish.
  ++misses;
  if (misses <= 64) {
    cpuRelax();
  } else if (misses <= 128) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool Executor::settle(Stream& stream, uint64_t finished, unsigned& misses) noexcept {
  std::atomic<uint64_t>& pending = stream.pending();
  uint64_t word = pending.load(std::memory_order_relaxed);
  for (;;) {
    // Only producers change the word while we own it, and they only add:
    // a stale `word` under-estimates the count, so count != 0 is reliable.
    const uint64_t count = (word & Stream::kCountMask) - finished;
    if (count != 0) {
      // A producer counted a task but has not linked it yet (Note [Pending
      // count]). Account for what we ran and let the caller retry the pop.
      if (finished != 0) retire(stream, finished);
      backOff(misses);
      return true;
    }
    // Idle now, but keep ownership through the linger bit.
    if (pending.compare_exchange_weak(word, Stream::kLingerBit, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      break;
    }
  }
  stream.notifyIdle();

  const uint64_t deadline = nowNs() + kLingerNs;
  for (unsigned spin = 1;; ++spin) {
    // acquire: see the producer's increment before popping its node.
    if ((pending.load(std::memory_order_acquire) & Stream::kCountMask) != 0) {
      pending.fetch_sub(Stream::kLingerBit, std::memory_order_acq_rel);
      return true;
    }
    const bool giveUp = stopping_.load(std::memory_order_relaxed) ||
                        readyMask_.load(std::memory_order_relaxed) != 0 ||
                        ((spin & 63u) == 0 && nowNs() >= deadline);
    if (giveUp) {
      uint64_t expected = Stream::kLingerBit;
      // acq_rel: release hands our consumer-side state to the next owner
      // (the producer whose fetch_add finds 0).
      if (pending.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return false;
      pending.fetch_sub(Stream::kLingerBit, std::memory_order_acq_rel);  // work arrived
      return true;
    }
    // Check the producers' cache line rarely: every read pulls it away from
    // a producer that is writing it, and a worker that re-reads it in a
    // tight loop makes every enqueue pay a cache-line transfer. Between
    // checks the producers fill the queue undisturbed; the worker then
    // drains a batch.
    for (int i = 0; i < kLingerPauses; ++i) cpuRelax();
  }
}

void Executor::runStream(std::shared_ptr<Stream> stream) noexcept {
  Stream& s = *stream;
  // Levels numbered below ours are of higher priority.
  const unsigned higher = (1u << s.level()) - 1u;
  uint64_t finished = 0;  // tasks run but not yet subtracted from the count
  int batch = 0;
  unsigned misses = 0;  // consecutive empty pops while tasks are counted
  for (;;) {
    if (stopping_.load(std::memory_order_relaxed)) {
      // Note [Shutdown order]: what is left is discarded by the shutdown.
      retire(s, finished);
      return;
    }
    Task* task = s.takeNext();
    if (task == nullptr) {
      if (!settle(s, finished, misses)) return;  // released: no longer ours to touch
      finished = 0;
      continue;
    }
    misses = 0;
    if (task->kind() == TaskKind::kEventWait) {
      EventVersion& version = static_cast<EventWaitTask*>(task)->version();
      if (!version.done()) {
        // The wait task stays counted, so the count cannot reach 0 here.
        retire(s, finished);
        finished = 0;
        if (version.parkUnlessDone(stream, task)) return;  // `stream` moved away
      }
    }
    execute(s, task);
    ++finished;
    if (++batch >= kBatchSize || (readyMask_.load(std::memory_order_relaxed) & higher) != 0) {
      batch = 0;
      if (readyMask_.load(std::memory_order_relaxed) != 0) {
        // Others are waiting for a core: requeue behind them (FIFO within a
        // level; a higher level is taken first anyway).
        const uint64_t left = retire(s, finished);
        finished = 0;
        if (left == 0) return;  // went idle with the retire: released
        schedule(std::move(stream));
        return;
      }
    }
  }
}

bool Executor::delayTask(uint64_t us) noexcept {
  std::unique_lock<std::mutex> lock(delayMutex_);
  const bool stopped = delayCv_.wait_for(lock, std::chrono::microseconds(us), [this] {
    return stopping_.load(std::memory_order_relaxed);
  });
  return !stopped;
}

void Executor::execute(Stream& stream, Task* task) noexcept {
  const bool isWork = task->kind() == TaskKind::kWork;
  // Note [Task failure rule]: work reaching the head of a failed stream is
  // discarded; records and waits complete normally.
  if (isWork && stream.hasFailure()) {
    task->discard();
    task->dispose();
    return;
  }
  const bool tracing = trace_.enabled();
  const uint64_t start = tracing ? nowNs() : 0;
  if (isWork) {
    // Note [Task delay]: the per-stream override wins over the global delay.
    const int64_t streamDelay = stream.delayOverrideUs();
    const uint64_t us = streamDelay >= 0 ? static_cast<uint64_t>(streamDelay)
                                         : globalDelayUs_.load(std::memory_order_relaxed);
    if (us != 0 && !delayTask(us)) {
      task->discard();  // shutdown during the delay: the task never started
      task->dispose();
      return;
    }
  }
  char errorBuf[kErrorBufSize];
  errorBuf[0] = '\0';
  const int status = task->run(errorBuf, sizeof errorBuf);
  errorBuf[sizeof errorBuf - 1] = '\0';  // a task may fill the buffer without a NUL
  if (status != 0) stream.recordFailure(task->name(), errorBuf);
  if (tracing) {
    trace_.record(TraceRecord{device_, stream.id(), task->name(), task->enqueueNs, start, nowNs(),
                              status != 0});
  }
  task->dispose();
}

}  // namespace npurt::internal
