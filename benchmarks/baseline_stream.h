// Baseline stream for npurt_bench: the design most device simulators start
// with (OpenReg's runtime among them) — one worker thread per stream draining a
// std::deque<std::function<void()>> guarded by a std::mutex, with a
// std::condition_variable notified once per enqueue.
//
// It is a fair baseline, not a strawman: notify_one is issued after the lock is
// released (so the woken worker does not immediately block on the mutex the
// producer still holds), an empty lambda fits std::function's small buffer (no
// heap allocation per task), and synchronize waits on a second condition
// variable instead of polling.
//
// Thread safety: enqueue() and synchronize() may be called from any number of
// threads at once. The destructor must not race with either.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace npubench {

class BaselineStream {
 public:
  BaselineStream() : worker_([this] { run(); }) {}
  BaselineStream(const BaselineStream&) = delete;
  BaselineStream& operator=(const BaselineStream&) = delete;

  // Drains the queue, then stops and joins the worker.
  ~BaselineStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }

  // Appends a task; it runs on the worker after every earlier task.
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(task));
    }
    work_cv_.notify_one();
  }

  // Blocks until the queue is empty and no task is running.
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left to run
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      task();
      task = nullptr;  // destroy captures outside the lock, like the run itself
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
    }
  }

  std::mutex mutex_;                         // guards queue_, busy_, stop_
  std::condition_variable work_cv_;          // queue_ non-empty or stop_
  std::condition_variable idle_cv_;          // queue_ empty and !busy_
  std::deque<std::function<void()>> queue_;  // pending tasks, FIFO
  bool busy_ = false;                        // a task is running on the worker
  bool stop_ = false;                        // destructor called
  std::thread worker_;                       // last member: starts after the rest exist
};

}  // namespace npubench
