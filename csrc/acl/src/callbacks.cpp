// ACL callbacks: aclrtSubscribeReport, aclrtUnSubscribeReport,
// aclrtLaunchCallback and aclrtProcessReport, over npurt tasks and deferred
// event versions.
//
// Note [ACL callbacks]
// ~~~~~~~~~~~~~~~~~~~~
// On an Ascend NPU a callback is not run by the device: when the stream
// reaches it, the runtime hands it to the host thread subscribed to the
// stream, which runs it inside aclrtProcessReport. Here:
//  - aclrtLaunchCallback queues an npurt task (npuTaskNotReplayable: a
//    callback cannot be captured) whose run hands (fn, userData) to the
//    subscribed thread's queue and wakes it. The task itself returns at once,
//    so no executor core waits for a host thread.
//  - ACL_CALLBACK_BLOCK: before that task, the launch makes a deferred
//    version of a private event (npuEventRecordDeferred) and, after it, the
//    stream waits on that version. The stream is parked without holding a
//    core until aclrtProcessReport has run fn and completed the version.
//  - Nothing hangs on a missing thread: a task discarded by npurt (a failed
//    stream, process exit) completes the version in its release without
//    calling fn; a callback whose stream was unsubscribed before the stream
//    reached it runs on the executor; aclrtUnSubscribeReport runs, on the
//    calling thread, the callbacks already handed to the thread.
// Thread ids are pthread_t values, as ACL programs pass them.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "acl/acl_rt.h"
#include "acl_common.h"

namespace acl {
namespace {

struct Report {
  aclrtCallback fn;
  void* userData;
  npuDeferredRecord_t unblock;  // completed after fn ran; nullptr: no block
  npuStream_t stream;
};

void runReport(const Report& r) {
  r.fn(r.userData);
  if (r.unblock != nullptr) (void)npuEventCompleteDeferred(r.unblock);
}

struct ThreadReports {
  std::deque<Report> queue;
  std::condition_variable ready;
  int subscriptions = 0;  // streams this thread subscribes
};

// Guarded by mutex. Thread entries are never erased: a ThreadReports may be
// waited on by its thread, and ids of exited threads are few.
struct Registry {
  std::mutex mutex;
  std::map<npuStream_t, uint64_t> threadOf;  // subscribed stream -> thread
  std::map<uint64_t, std::unique_ptr<ThreadReports>> threads;

  ThreadReports& thread(uint64_t id) {
    auto& slot = threads[id];
    if (!slot) slot = std::make_unique<ThreadReports>();
    return *slot;
  }
};

Registry& registry() {
  // Leaked: executors may hand over reports while the process exits.
  static auto* r = std::make_unique<Registry>().release();
  return *r;
}

// userData of the launched task.
struct PendingReport {
  Report report;
  bool handedOver = false;
};

int handOver(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  auto* pending = static_cast<PendingReport*>(user);
  Registry& reg = registry();
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.threadOf.find(pending->report.stream);
    if (it != reg.threadOf.end()) {
      ThreadReports& t = reg.thread(it->second);
      t.queue.push_back(pending->report);
      t.ready.notify_all();
      pending->handedOver = true;
      return 0;
    }
  }
  runReport(pending->report);  // unsubscribed meanwhile: see Note [ACL callbacks]
  pending->handedOver = true;
  return 0;
}

void releasePending(void* user) {
  std::unique_ptr<PendingReport> pending(static_cast<PendingReport*>(user));
  // Discarded without running: open the stream, do not call fn.
  if (!pending->handedOver && pending->report.unblock != nullptr) {
    (void)npuEventCompleteDeferred(pending->report.unblock);
  }
}

// Queues the hand-over task and, for a blocking callback, the stream's wait
// on `gate`. If the task could not be queued, completes report.unblock
// itself, so that nothing waits for a callback that will never run.
aclError launchReport(const Report& report, npuEvent_t gate) {
  auto pending = std::make_unique<PendingReport>();
  pending->report = report;
  npuTask task{};
  task.name = "aclrtLaunchCallback";
  task.run = &handOver;
  task.release = &releasePending;
  task.userData = pending.get();
  task.flags = npuTaskNotReplayable;
  if (aclError e = check(npuLaunchTask(report.stream, &task), "aclrtLaunchCallback")) {
    if (report.unblock != nullptr) (void)npuEventCompleteDeferred(report.unblock);
    return e;
  }
  (void)pending.release();  // owned by the task from here on
  if (gate == nullptr) return ACL_SUCCESS;
  return check(npuStreamWaitEvent(report.stream, gate, 0), "aclrtLaunchCallback");
}

}  // namespace
}  // namespace acl

using acl::check;
using acl::fail;
using acl::guarded;
using acl::resolveStream;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
  return guarded("aclrtSubscribeReport", [&]() -> aclError {
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtSubscribeReport")) return e;
    int device = 0;
    if (aclError e = check(npuStreamGetDevice(s, &device), "aclrtSubscribeReport")) return e;
    acl::Registry& reg = acl::registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (reg.threadOf.count(s) != 0) {
      return fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                  "aclrtSubscribeReport: the stream already has a subscribed thread "
                  "(aclrtUnSubscribeReport it first)");
    }
    reg.threadOf.emplace(s, threadId);
    ++reg.thread(threadId).subscriptions;
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
  return guarded("aclrtUnSubscribeReport", [&]() -> aclError {
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtUnSubscribeReport")) return e;
    std::vector<acl::Report> handedOver;
    {
      acl::Registry& reg = acl::registry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      auto it = reg.threadOf.find(s);
      if (it == reg.threadOf.end() || it->second != threadId) {
        return fail(ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                    "aclrtUnSubscribeReport: the thread does not subscribe this stream");
      }
      reg.threadOf.erase(it);
      acl::ThreadReports& t = reg.thread(threadId);
      --t.subscriptions;
      for (auto r = t.queue.begin(); r != t.queue.end();) {
        if (r->stream == s) {
          handedOver.push_back(*r);
          r = t.queue.erase(r);
        } else {
          ++r;
        }
      }
    }
    for (const acl::Report& r : handedOver) acl::runReport(r);
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void* userData,
                                                 aclrtCallbackBlockType blockType,
                                                 aclrtStream stream) {
  return guarded("aclrtLaunchCallback", [&]() -> aclError {
    if (fn == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is NULL");
    const int rawBlockType = acl::rawEnum(blockType);
    if (rawBlockType != ACL_CALLBACK_NO_BLOCK && rawBlockType != ACL_CALLBACK_BLOCK) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: blockType " +
                                               std::to_string(rawBlockType) +
                                               " is neither ACL_CALLBACK_NO_BLOCK nor _BLOCK");
    }
    npuStream_t s = nullptr;
    if (aclError e = resolveStream(stream, &s, "aclrtLaunchCallback")) return e;
    {
      acl::Registry& reg = acl::registry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      if (reg.threadOf.count(s) == 0) {
        return fail(ACL_ERROR_RT_STREAM_NO_CB_REG,
                    "aclrtLaunchCallback: no thread subscribes the stream "
                    "(call aclrtSubscribeReport first)");
      }
    }
    acl::Report report{fn, userData, nullptr, s};
    if (blockType == ACL_CALLBACK_NO_BLOCK) return acl::launchReport(report, nullptr);
    npuEvent_t gate = nullptr;
    if (aclError e = check(npuEventCreateWithFlags(&gate, npuEventDisableTiming),
                           "aclrtLaunchCallback")) {
      return e;
    }
    aclError status = check(npuEventRecordDeferred(gate, &report.unblock), "aclrtLaunchCallback");
    if (status == ACL_SUCCESS) status = acl::launchReport(report, gate);
    (void)npuEventDestroy(gate);  // pending versions and bound waits still resolve
    return status;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout) {
  return guarded("aclrtProcessReport", [&]() -> aclError {
    if (timeout < -1) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtProcessReport: timeout " + std::to_string(timeout) +
                                               " ms is invalid (-1 waits forever, else >= 0)");
    }
    const auto self = static_cast<uint64_t>(pthread_self());
    acl::Registry& reg = acl::registry();
    std::unique_lock<std::mutex> lock(reg.mutex);
    acl::ThreadReports& t = reg.thread(self);
    if (t.subscriptions == 0 && t.queue.empty()) {
      return fail(ACL_ERROR_RT_THREAD_SUBSCRIBE,
                  "aclrtProcessReport: the calling thread subscribes no stream "
                  "(aclrtSubscribeReport(thread, stream) first)");
    }
    auto hasReport = [&] { return !t.queue.empty(); };
    if (timeout == -1) {
      t.ready.wait(lock, hasReport);
    } else if (!t.ready.wait_for(lock, std::chrono::milliseconds(timeout), hasReport)) {
      return fail(ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport: no callback within " +
                                                   std::to_string(timeout) + " ms");
    }
    const acl::Report report = t.queue.front();
    t.queue.pop_front();
    lock.unlock();
    acl::runReport(report);
    return ACL_SUCCESS;
  });
}

}  // extern "C"
