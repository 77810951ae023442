// The communication threads of a ProcessGroupHCCL (issuer and completer):
// where gloo is called.
//
// Layer: distributed (csrc/distributed). Uses core only.
//
// Note [Collectives run on a communication thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective must run in stream order (after the work queued before it on
// the caller's current stream, before the work that waits for it), and the
// transport is gloo, which blocks until every peer has joined. A task on the
// communication stream that called gloo itself would hold an executor core
// for as long as the slowest peer takes; with NPU_SIM_CORES=2, two such tasks
// (two groups, or one group and a peer waiting for our compute) take every
// core, and the compute work the peers wait for never runs: a deadlock across
// processes. So no task ever blocks. Each collective is three things on its
// stream (see "Streams" below), plus one item for the group's host threads:
//
//   1. a *ready* task: it runs once the stream reached the collective (its
//      inputs are written) and only signals the group's issuer thread;
//   2. a wait on a *gate*, a deferred event version (npuEventRecordDeferred)
//      that the completer thread opens when gloo is done; the stream
//      is parked on it and holds no core meanwhile;
//   3. a *check* task that fails, with gloo's error, if the collective
//      failed, so that the stream reports it once like any task failure.
//
// Two host threads per group (not executors) do the rest. The *issuer*
// takes the items in the order the collectives were called, waits for each
// one's ready signal and hands the call to gloo over CPU aliases of the
// tensors (core/CPUAlias.h); gloo's calls return at once. The *completer*
// waits for gloo's Works in the same order, opens each gate, waits for the
// stream to pass the check task, and completes our Work. Gloo matches
// collectives across ranks by the order in which they are issued, and every
// rank issues its group's collectives in program order, so the orders agree
// as long as the program calls them in the same order on every rank (the
// contract of torch.distributed).
//
// Streams: collectives share the group's communication stream, so each one
// is issued only after the previous one completed (its gate is ahead of the
// next ready task), as on hardware. Point-to-point operations use one stream
// per peer and direction (torch_npu keys its send/recv streams by peer too):
// gloo's send completes only once the peer posted the matching receive, so a
// send and a receive that share a stream would deadlock an isend/irecv
// exchange; on streams of their own, both are issued before either completes.
//
// Liveness: the gate is opened exactly once whatever happens (gloo error,
// ready task discarded because the stream is in a failure state, the group
// destroyed), so a parked communication stream never waits forever; a peer
// that died or hangs makes gloo fail after the group's timeout.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "npurt/npurt.h"

namespace c10d_npu {

class WorkHCCL;

// The state one collective shares between the calling thread, the tasks on
// its stream's tasks and the communication threads. It holds no tensors,
// so the tasks that capture it never drop a tensor on an executor. Thread-safe.
class CollectiveState {
 public:
  enum class Ready { kPending, kRan, kDiscarded };

  explicit CollectiveState(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Called by the ready task (run: kRan; release without run: kDiscarded).
  void signal(Ready how);
  // Blocks until signal() was called; returns how.
  Ready waitReady();

  // Sets the failure (first one wins) and returns its message.
  void fail(std::exception_ptr error);
  std::exception_ptr error() const;
  // The failure's message, or empty. For the check task.
  std::string errorMessage() const;

  // Set once the gate is open and the stream passed the check task.
  void complete(int sourceRank);
  bool completed() const;
  void waitCompleted();
  int sourceRank() const;

 private:
  const std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  Ready ready_ = Ready::kPending;
  std::exception_ptr error_;
  std::string errorMessage_;
  bool completed_ = false;
  int sourceRank_ = -1;
};

// What the communication threads do for one collective.
struct CommItem {
  std::shared_ptr<CollectiveState> state;
  // Calls gloo over CPU aliases; returns gloo's Work. Runs on the
  // communication thread.
  std::function<c10::intrusive_ptr<c10d::Work>()> issue;
  npuDeferredRecord_t gate = nullptr;  // completed exactly once by the thread
  c10::intrusive_ptr<WorkHCCL> work;   // completed after the gate
  std::vector<at::Tensor> outputs;     // poisoned if the collective fails
};

// The host threads of one process group that call gloo: an issuer, which
// issues the group's collectives to gloo in submission order, and a completer,
// which waits for gloo's Works in that order and completes ours. See Note
// [Collectives run on a communication thread].
class CommThread {
 public:
  explicit CommThread(int rank);
  // Fails the items not issued yet ("the process group was destroyed"),
  // waits for the issued ones (bounded by gloo's timeout) and joins.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues an item. Thread-safe; items are issued in the order of the calls.
  void submit(CommItem item);

 private:
  // An item gloo has (or, on error, has not) been given.
  struct Issued {
    CommItem item;
    c10::intrusive_ptr<c10d::Work> work;  // null if the item failed before gloo had it
  };

  void issueLoop();
  void completeLoop();
  // Opens the gate, waits for the stream to pass the check task, completes
  // the Work. Never throws.
  static void finish(CommItem& item, int sourceRank) noexcept;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<CommItem> items_;   // to issue; guarded by mutex_
  std::deque<Issued> issued_;    // to complete; guarded by mutex_
  bool stop_ = false;            // guarded by mutex_
  bool issuerDone_ = false;      // guarded by mutex_: nothing more reaches issued_
  // Completed items, destroyed by the next submit() or by the destructor
  // after the joins; guarded by mutex_. See Note [Communication threads drop
  // no tensors] in CommThread.cpp.
  std::vector<CommItem> finished_;
  std::thread completer_;        // last: started after the fields above exist
  std::thread issuer_;
};

}  // namespace c10d_npu
