// Executor: the "cores" of one device — a fixed pool of threads that run
// streams. See Note [Stream scheduling rule] in csrc/npurt/README.md.
//
// Ready queue: one FIFO of streams per priority level, under one mutex, plus
// a bitmask of non-empty levels that workers read without the lock to decide
// whether to yield. A stream enters the ready queue when a producer moves it
// from idle to owned (Note [Stream ownership] in stream.h), when a worker
// yields it, or when the event version it is parked on completes.
//
// A worker takes the highest-priority ready stream and runs up to
// kBatchSize of its tasks in a row, giving the stream up earlier if a stream
// of higher priority becomes ready. The worker takes tasks as the producers
// published them; when it catches up with them it does not chase them one
// task at a time (each look at the producers' cache lines slows the next
// enqueue down): it lingers on the stream (kLingerNs), looking for new work
// only every kLookIntervalNs, and then drains everything published
// meanwhile as one batch. The linger ends at once if any other
// stream becomes ready; then the stream is released (kIdleBit). Workers with
// nothing to do sleep, each on its own condition variable; a producer wakes
// one only if one sleeps (Note [Worker wake order]).
//
// Note [Worker wake order]
// A stream that was released and gets new work is woken on the worker that
// ran it last if that worker sleeps, else on the worker that fell asleep
// most recently (a LIFO stack of sleepers), never on the one that has slept
// longest. Kernels keep per-thread state warm on the thread that runs them:
// caches, and above all the intra-op thread team that OpenMP keeps per
// calling thread. Waking sleepers in FIFO order (what a shared condition
// variable does) moves a single busy stream to a different worker at every
// release, so consecutive kernels alternate between teams whose threads
// have gone to sleep, and every team in the process then spins less
// (libgomp shortens spin-waits once it manages more threads than CPUs).
// This is only a preference: a stream still runs on any worker that is free
// when it is taken from the ready queue.
//
// Note [Consumer distance]
// Reading a task the producer has just written takes its cache line away
// from the producer, and worse, the reader's hardware prefetcher follows the
// sequential reads into entries the producer is about to write. A worker that
// runs right behind a producer therefore makes every enqueue wait for line
// transfers, and both crawl in lockstep. So before each batch the worker
// looks at how far the producers are ahead (one read of the tail word per
// batch): kDistance ring entries or more, it runs all but the newest
// kMargin of them (the prefetcher would follow its reads into the newest
// lines); fewer, it waits in steps of kLookIntervalNs (at most
// kDistanceWaits) while the producers make progress, then runs whatever is
// there. Tasks found right after taking the stream, or after having caught
// up and waited for work, run at once (the common, latency-bound case of a
// few tasks).
//
// Note [Executor thread start]
// Threads start on the device's first stream creation (not at process start,
// so a process that never uses a device pays nothing for it). Starting is
// exception-safe: if a thread cannot be created, the threads already started
// are stopped and joined and the error propagates.
//
// Thread safety: start(), schedule() and stop() are thread-safe. Everything
// else runs on the executor's own threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "stream.h"
#include "utilization.h"

namespace npurt::internal {

class Trace;

// Note [Op execution timeout] (csrc/npurt/README.md): the process-wide
// timeout of work tasks in microseconds, 0 = none. Relaxed: it is read once
// per task, and nothing else hangs off it. Thread-safe.
void setOpExecuteTimeoutUs(uint64_t us) noexcept;
uint64_t opExecuteTimeoutUs() noexcept;

class Executor {
 public:
  // Tasks run per stream before the worker looks at other ready streams.
  static constexpr int kBatchSize = 64;
  // How long a worker keeps an empty stream before releasing it.
  static constexpr uint64_t kLingerNs = 5'000;
  // See Note [Consumer distance]: ring entries (four to a cache line)
  // between the worker and the producers. Measured both ways: 256 and 64
  // (the same distance in lines as 64 and 16 one-line slots) saved 2 ns per
  // npurt::launch in npurt_bench but let a trickling producer keep the
  // worker waiting, and bench_torch.py's tiny op went from 1.25-1.31x cpu
  // to 1.30-2.07x.
  static constexpr uint64_t kDistance = 64;
  // Entries left unread behind producers that are still enqueuing, so that
  // our reads (and the prefetches that follow them) stay off the lines
  // they are writing. Less than kDistance.
  static constexpr uint64_t kMargin = 16;
  static_assert(kMargin < kDistance);
  static constexpr int kDistanceWaits = 32;
  // Time between two looks at a drained stream's next entry.
  static constexpr uint64_t kLookIntervalNs = 1'000;
  // Size of the buffer a failing task writes its message into.
  static constexpr size_t kErrorBufSize = 1024;

  Executor(int device, int cores, Trace& trace, const std::atomic<uint32_t>& globalDelayUs);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor();

  int cores() const noexcept { return cores_; }

  // Percent of the cores' time spent running work over the last second
  // (Note [Device utilization] in utilization.h). Thread-safe.
  unsigned utilizationPercent() const noexcept;

  // Starts the worker threads unless already started. Thread-safe.
  // Throws std::system_error if a thread cannot be created (see
  // Note [Executor thread start]).
  void start();

  // Puts a stream the caller owns (Note [Stream ownership]) on the ready queue
  // and wakes a sleeping worker if there is one. Thread-safe; never
  // allocates. After stop() the stream is dropped: shutdown drains it.
  void schedule(std::shared_ptr<Stream> stream) noexcept;

  // Stops the workers after their current task, joins them and empties the
  // ready queue. A worker whose task has not returned by deadlineNs (on
  // nowNs()'s clock) is abandoned: detached, left to finish its task on its
  // own, and the stream it runs is reported by ranByAbandonedWorker().
  // Idempotent; thread-safe. See Note [Shutdown order].
  void stop(uint64_t deadlineNs = UINT64_MAX) noexcept;

  // After stop(): true if `stream` was being run by an abandoned worker, so
  // the worker may still touch its queue (the shutdown leaves it alone).
  bool ranByAbandonedWorker(const Stream* stream) noexcept;

 private:
  void workerLoop(int self) noexcept;
  std::shared_ptr<Stream> takeReady(int self) noexcept;
  void runStream(std::shared_ptr<Stream> stream, int self) noexcept;
  // Under mutex_: takes the worker to wake for `stream` off the sleeper
  // stack (Note [Worker wake order]), or returns -1 if none sleeps.
  int takeSleeperFor(const Stream& stream) noexcept;
  // Wakes every worker (stop()). Call with stopping_ set under mutex_.
  void wakeAll() noexcept;
  // Nothing is published at the stream's front: wakes idle waiters and
  // lingers. Returns true with `task` filled when work arrives; false if
  // the worker released the stream (no longer ours to touch) or the
  // executor is stopping.
  bool awaitWork(Stream& stream, InlineTask& task, int self) noexcept;
  // Note [Consumer distance]: returns the ticket up to which to run before
  // looking again.
  static uint64_t keepDistance(const TaskQueue& queue, bool fresh) noexcept;
  // Escalates the wait for a task whose producer has its ticket but has not
  // published it yet (TaskQueue::Front::kPending): yield, then sleep.
  static void backOff(unsigned& misses) noexcept;
  // Runs (or discards) the front task, then pops it. See Note [Completion
  // order] in event.h for event records.
  void execute(Stream& stream, InlineTask& task) noexcept;
  void completeRecord(Stream& stream, InlineTask& task) noexcept;
  // Note [Op execution timeout]: turns a successful work task that ran
  // longer than the timeout into a failure (status 1, message in errorBuf).
  static int checkTimeout(uint64_t startNs, uint64_t timeoutUs, char* errorBuf,
                          size_t errorBufSize) noexcept;
  // Sleeps for the task delay; false if stop() interrupted the sleep.
  bool delayTask(uint64_t us) noexcept;

  const int device_;
  const int cores_;
  Trace& trace_;
  const std::atomic<uint32_t>& globalDelayUs_;  // npuSetTaskDelay

  // A worker's own wake-up. One per worker, made in the constructor and
  // never moved, so a producer may notify one after dropping mutex_.
  struct Sleeper {
    std::condition_variable cv;
    bool woken = false;               // guarded by mutex_
    bool exited = false;              // guarded by mutex_: workerLoop returned
    bool abandoned = false;           // guarded by mutex_: stop() gave up on it
    const Stream* running = nullptr;  // guarded by mutex_: taken from the ready queue
  };

  std::mutex mutex_;                // guards ready_, sleeping_, Sleeper fields, stopping_ writes
  std::condition_variable exitCv_;  // a worker exited (stop() waits for them)
  std::vector<std::unique_ptr<Sleeper>> sleepers_;  // index = worker
  UtilizationMeter utilization_;                     // Note [Device utilization]
  // Workers asleep, the most recent last (Note [Worker wake order]).
  // Capacity reserved for every worker: pushing never allocates.
  std::vector<int> sleeping_;
  StreamList ready_[kPriorityLevels];  // level 0 = highest priority
  // Bit i set iff ready_[i] is non-empty. Written under mutex_, read without
  // it (relaxed) as a hint: a stale value only delays a yield by one task.
  std::atomic<unsigned> readyMask_{0};
  std::atomic<bool> stopping_{false};  // set once by stop()

  std::mutex startMutex_;  // serialises start() and stop()
  std::atomic<bool> started_{false};
  std::vector<std::thread> threads_;

  std::mutex delayMutex_;  // for interruptible task delays
  std::condition_variable delayCv_;
};

}  // namespace npurt::internal
