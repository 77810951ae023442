// Inter-process events: torch.npu.Event(interprocess=True), ipc_handle() and
// Event.from_ipc_handle (CUDA's cudaEventInterprocess, cudaIpcGetEventHandle
// and cudaIpcOpenEventHandle).
//
// Layer: framework core, on npurt's public API (deferred records) and a page
// of shared memory: npurt's events live inside one process.
//
// Note [Inter-process events]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An interprocess event is a page of shared memory (a memfd) holding two
// counters: `recorded`, the number of records made so far by any process,
// and `completed`, the highest record whose work has completed. The process
// that creates the event owns the page and keeps its file open while the
// event lives; the 64-byte handle names the owner's pid, that file and a
// random token, and another process maps the page through /proc/<pid>/fd/<n>
// (a process may open the files of another process of its user), checking
// the token. Then, in every process that holds the event:
//  - record(s) takes the next number n (recorded += 1) and queues on s a task
//    that sets completed = max(completed, n) and wakes the waiters. A failure
//    of s that discards the task completes it all the same (its release
//    does), as a discarded npurt record completes: no process waits forever
//    on a stream that failed;
//  - query() is completed >= recorded, read now: the latest record, made by
//    whichever process, completed;
//  - synchronize() waits (a futex on `completed`) until completed reaches the
//    `recorded` it read at the call;
//  - wait(s) makes s wait for the same condition: s waits on a deferred
//    record of a local npurt event (parked, holding no executor; Note [Event
//    versioning]), which a watcher thread completes when the counter gets
//    there.
// A process that records and then dies before the work completed would leave
// the others waiting forever, so every record stores its process id and
// waits check, every 100 ms of waiting, that the process still exists (a
// zombie counts as gone): if it does not, synchronize() raises, and wait(s)
// lets s go on but fails it with that error (a task queued behind the wait),
// so the error reaches the stream that waited. Timing is not supported (CUDA
// requires cudaEventDisableTiming for interprocess events). As with CUDA, the
// owner's event must live until the other processes opened the handle.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "core/NPUStream.h"

namespace c10_npu {

struct IpcEventPage;

// Thread-safe: every member function may be called from any thread.
class NPUIpcEvent {
 public:
  // A new event on `device`, owned by this process.
  static std::unique_ptr<NPUIpcEvent> create(c10::DeviceIndex device);
  // The event a handle names (from ipc_handle() of any process). Raises a
  // clear error for a handle that is malformed, or whose owner exited or
  // destroyed the event.
  static std::unique_ptr<NPUIpcEvent> open(c10::DeviceIndex device, const std::string& handle);

  NPUIpcEvent(c10::DeviceIndex device, std::shared_ptr<IpcEventPage> page) noexcept;
  ~NPUIpcEvent();
  NPUIpcEvent(const NPUIpcEvent&) = delete;
  NPUIpcEvent& operator=(const NPUIpcEvent&) = delete;

  c10::DeviceIndex device_index() const noexcept { return device_; }
  // The 64-byte handle other processes open.
  std::string handle() const;

  // Records on `stream`, which must be on the event's device ("Event device X
  // does not match recording stream's device Y."); raises for an external
  // stream in compat mode, as events do.
  void record(const NPUStream& stream);
  // Makes later work on `stream` wait for the latest record of any process.
  void block(const NPUStream& stream);
  bool query() const;
  // Blocks until the latest record of any process completed; raises if the
  // process that made it died first. Call without the GIL.
  void synchronize() const;

 private:
  const c10::DeviceIndex device_;
  const std::shared_ptr<IpcEventPage> page_;
};

}  // namespace c10_npu
