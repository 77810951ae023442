// Device-level functions of the framework core: count, current device,
// device synchronize. Thin, checked wrappers over npurt for c10 types.
//
// Layer: framework core. All functions are thread-safe; the current device is
// per host thread (npurt's rule).
#pragma once

#include <c10/core/Device.h>

namespace c10_npu {

// Note [Fork]
// ~~~~~~~~~~~
// A child forked from a process that used the npu has none of the parent's
// device threads (executors, task-queue consumers): npurt refuses every call
// there (npuGetForkState), and this layer turns that into torch_npu's message
// at the first use, before anything is queued where no thread would take it.
// A child of a process that never used the npu works normally, and a child
// that never touches the npu exits cleanly (DataLoader fork workers).
inline constexpr const char* kBadForkMessage =
    "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must "
    "use the 'spawn' start method";

// True in a forked child of a process that had initialised the npu. One
// relaxed load unless the process forked. Thread-safe.
bool inBadFork() noexcept;

// Raises kBadForkMessage (RuntimeError) in such a child. Thread-safe.
void checkNotInBadFork();

// Number of devices; 0 if the runtime cannot initialise (never throws, as
// DeviceGuardImplInterface::deviceCount requires).
c10::DeviceIndex device_count() noexcept;

// Number of devices; raises the runtime's initialisation error, if any.
c10::DeviceIndex device_count_ensure_non_zero();

c10::DeviceIndex current_device();

// Raises "Invalid device_index: N" (RuntimeError) for a bad index.
void set_device(c10::DeviceIndex device);

// Switches device and returns the previous one.
c10::DeviceIndex exchange_device(c10::DeviceIndex device);

// Blocks until the work queued on `stream` so far finished, so the host may
// read its results (item(), blocking copies, the synchronous op path). An
// external stream in compat mode cannot be synchronized by itself (torch_npu
// refuses it); the device is synchronized instead, which covers it.
class NPUStream;
void waitForHostRead(const NPUStream& stream);

// Blocks until all work of the device finished: drains the device's task
// queues, then synchronizes every stream of the device (external ones
// included). Raises the first task failure of the device.
void device_synchronize(c10::DeviceIndex device);

}  // namespace c10_npu
