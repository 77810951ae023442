// Executor: the "cores" of one device — a fixed pool of threads that run
// streams. See Note [Stream scheduling rule] in csrc/npurt/README.md.
//
// Ready queue: one FIFO of streams per priority level, under one mutex, plus
// a bitmask of non-empty levels that workers read without the lock to decide
// whether to yield. A stream enters the ready queue when a producer moves it
// from idle to busy (Note [Pending count] in stream.h), when a worker yields
// it, or when the event version it is parked on completes.
//
// A worker takes the highest-priority ready stream and runs up to
// kBatchSize of its tasks in a row, giving the stream up earlier if a stream
// of higher priority becomes ready. When the stream runs dry the worker
// lingers on it briefly (kLingerNs, spinning) before releasing it, so a host
// thread enqueuing in a loop feeds a worker that is already awake; the
// linger ends at once if any other stream becomes ready. Workers with
// nothing to do sleep on a condition variable; a producer notifies only if
// a worker sleeps (sleepers_).
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

namespace npurt::internal {

class Trace;

class Executor {
 public:
  // Tasks run per stream before the worker looks at other ready streams.
  static constexpr int kBatchSize = 64;
  // How long a worker keeps an empty stream before releasing it.
  static constexpr uint64_t kLingerNs = 5'000;
  // Pause instructions between two looks at a lingered stream's count.
  static constexpr int kLingerPauses = 32;
  // Size of the buffer a failing task writes its message into.
  static constexpr size_t kErrorBufSize = 1024;

  Executor(int device, int cores, Trace& trace, const std::atomic<uint32_t>& globalDelayUs);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor();

  int cores() const noexcept { return cores_; }

  // Starts the worker threads unless already started. Thread-safe.
  // Throws std::system_error if a thread cannot be created (see
  // Note [Executor thread start]).
  void start();

  // Puts a stream the caller owns (Note [Pending count]) on the ready queue
  // and wakes a sleeping worker if there is one. Thread-safe; never
  // allocates. After stop() the stream is dropped: shutdown drains it.
  void schedule(std::shared_ptr<Stream> stream) noexcept;

  // Stops the workers after their current task, joins them and empties the
  // ready queue. Idempotent; thread-safe. See Note [Shutdown order].
  void stop() noexcept;

 private:
  void workerLoop() noexcept;
  std::shared_ptr<Stream> takeReady() noexcept;
  void runStream(std::shared_ptr<Stream> stream) noexcept;
  // Subtracts `finished` from the stream's count; returns the new count.
  uint64_t retire(Stream& stream, uint64_t finished) noexcept;
  // The queue looked empty: retire `finished` and linger. Returns true if
  // the worker still owns the stream and should look for tasks again.
  // `misses` counts consecutive empty pops while tasks are counted.
  bool settle(Stream& stream, uint64_t finished, unsigned& misses) noexcept;
  // Waits a little for a half-pushed node (see settle).
  static void backOff(unsigned& misses) noexcept;
  void execute(Stream& stream, Task* task) noexcept;
  // Sleeps for the task delay; false if stop() interrupted the sleep.
  bool delayTask(uint64_t us) noexcept;

  const int device_;
  const int cores_;
  Trace& trace_;
  const std::atomic<uint32_t>& globalDelayUs_;  // npuSetTaskDelay

  std::mutex mutex_;                   // guards ready_, sleepers_, stopping_ writes
  std::condition_variable workCv_;     // sleeping workers
  StreamList ready_[kPriorityLevels];  // level 0 = highest priority
  // Bit i set iff ready_[i] is non-empty. Written under mutex_, read without
  // it (relaxed) as a hint: a stale value only delays a yield by one task.
  std::atomic<unsigned> readyMask_{0};
  int sleepers_ = 0;                   // workers blocked in workCv_
  std::atomic<bool> stopping_{false};  // set once by stop()

  std::mutex startMutex_;  // serialises start() and stop()
  std::atomic<bool> started_{false};
  std::vector<std::thread> threads_;

  std::mutex delayMutex_;  // for interruptible task delays
  std::condition_variable delayCv_;
};

}  // namespace npurt::internal
