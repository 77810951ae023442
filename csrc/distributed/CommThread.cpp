// See CommThread.hpp and Note [Collectives run on a communication thread].
#include "distributed/CommThread.hpp"

#include <c10/util/Exception.h>
#include <c10/util/thread_name.h>

#include <utility>

#include "core/PoisonedMemory.h"
#include "distributed/WorkHCCL.hpp"

namespace c10d_npu {

namespace {

// A c10::Error (RuntimeError in Python) with `message`, as an exception_ptr.
std::exception_ptr errorOf(const std::string& message) {
  try {
    TORCH_CHECK(false, message);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;  // unreachable
}

}  // namespace

void CollectiveState::signal(Ready how) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_ != Ready::kPending) return;
    ready_ = how;
  }
  cv_.notify_all();
}

CollectiveState::Ready CollectiveState::waitReady() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return ready_ != Ready::kPending; });
  return ready_;
}

void CollectiveState::fail(std::exception_ptr error) {
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) return;
  error_ = std::move(error);
  errorMessage_ = "ProcessGroupHCCL::" + name_ + " failed: " + message;
}

std::exception_ptr CollectiveState::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

std::string CollectiveState::errorMessage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errorMessage_;
}

void CollectiveState::complete(int sourceRank) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    sourceRank_ = sourceRank;
  }
  cv_.notify_all();
}

bool CollectiveState::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

void CollectiveState::waitCompleted() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });
}

int CollectiveState::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sourceRank_;
}

CommThread::CommThread(int rank) {
  completer_ = std::thread([this, rank] {
    c10::setThreadName("npu hccl done r" + std::to_string(rank));
    completeLoop();
  });
  try {
    issuer_ = std::thread([this, rank] {
      c10::setThreadName("npu hccl r" + std::to_string(rank));
      issueLoop();
    });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = issuerDone_ = true;
    }
    cv_.notify_all();
    completer_.join();
    throw;
  }
}

CommThread::~CommThread() {
  std::deque<CommItem> abandoned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    abandoned.swap(items_);
  }
  cv_.notify_all();
  for (CommItem& item : abandoned) {
    item.state->fail(errorOf("the process group was destroyed before the collective was issued"));
    finish(item, -1);
  }
  issuer_.join();  // then the completer drains what was issued
  completer_.join();
}

// Note [Communication threads drop no tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A completed item holds tensors (its outputs, its WorkHCCL's) that Python
// may know. Dropping the last reference to such a tensor takes the GIL, and
// the process group's destructor runs with the GIL held (Python's dealloc)
// and joins the completer: a completer that dropped such a tensor then waited
// for the GIL forever (seen in a test run under AddressSanitizer). So the
// completer parks completed items in finished_, and host threads destroy
// them: the next submit(), or the destructor after the joins. A tensor whose
// only owner was a finished collective is freed at the group's next
// collective, not at once.
void CommThread::submit(CommItem item) {
  std::vector<CommItem> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stop_, "ProcessGroupHCCL::", item.state->name(),
                ": the process group is being destroyed");
    items_.push_back(std::move(item));
    finished.swap(finished_);
  }
  cv_.notify_all();
  // `finished` is destroyed here, on this host thread.
}

void CommThread::issueLoop() {
  for (;;) {
    CommItem item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) {  // stop_ and nothing left
        issuerDone_ = true;
        break;
      }
      item = std::move(items_.front());
      items_.pop_front();
    }
    CollectiveState& state = *item.state;
    c10::intrusive_ptr<c10d::Work> work;
    if (state.waitReady() == CollectiveState::Ready::kDiscarded) {
      // The stream discarded the ready task: an earlier task of the stream
      // failed and was not reported yet (Note [Task failure rule]). Not
      // issuing it keeps the gate's promise (it opens).
      state.fail(errorOf(
          "not issued: its stream holds an earlier failure that was not reported yet; "
          "torch.npu.synchronize() reports it"));
    } else {
      try {
        work = item.issue();  // returns at once: gloo runs it on its own threads
      } catch (...) {
        state.fail(std::current_exception());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      issued_.push_back(Issued{std::move(item), std::move(work)});
    }
    cv_.notify_all();
  }
  cv_.notify_all();
}

void CommThread::completeLoop() {
  for (;;) {
    Issued next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return issuerDone_ || !issued_.empty(); });
      if (issued_.empty()) return;  // the issuer is done and nothing is left
      next = std::move(issued_.front());
      issued_.pop_front();
    }
    int sourceRank = -1;
    if (next.work) {
      try {
        next.work->wait();
        if (next.work->retrieveOpType() == c10d::OpType::RECVANYSOURCE) {
          sourceRank = next.work->sourceRank();
        }
      } catch (...) {
        next.item.state->fail(std::current_exception());
      }
      next.work.reset();  // gloo's Work holds CPU aliases only
    }
    finish(next.item, sourceRank);
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.push_back(std::move(next.item));  // Note [Communication threads drop no tensors]
  }
}

void CommThread::finish(CommItem& item, int sourceRank) noexcept {
  CollectiveState& state = *item.state;
  if (state.error()) {
    // Note [Poisoned memory]: what the collective should have written holds
    // no valid data; reading it raises the error.
    const auto message = std::make_shared<const std::string>(state.errorMessage());
    for (const at::Tensor& output : item.outputs) {
      if (output.has_storage()) {
        c10_npu::poison::mark(output.storage().getWeakStorageImpl(), message);
      }
    }
  }
  if (item.gate != nullptr) {
    (void)npuEventCompleteDeferred(item.gate);  // fails only in a forked child
    item.gate = nullptr;
  }
  // The stream passes the check task and records the end event right after
  // the gate; waiting for it here is what makes isCompleted() and the Future
  // mean "done on the device".
  if (item.work) item.work->waitDeviceDone();
  state.complete(sourceRank);
  if (item.work) item.work->completeFuture();
}

}  // namespace c10d_npu
