// Per-stream resource limits (torch_npu.npu.set_stream_limit and friends).
//
// Layer: framework core.
//
// Note [Stream resource limits on the simulated NPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On an Ascend NPU a stream can be limited to a number of cube (matrix) and
// vector cores. The simulated device has one kind of core: the executor
// threads of the device (NPU_SIM_CORES), and a kernel may itself run on
// several host threads (ATen's intra-op parallelism). A limit therefore
// caps the *parallelism of one kernel* on that stream:
//   - both kinds accept 1 .. coreCount of the device, or -1 = "no limit";
//   - an unset kind reports the device's coreCount, as torch_npu reports the
//     device's own core numbers for an unlimited stream;
//   - intraOpThreads(stream) is the cap the op layer applies to a kernel
//     launched on the stream: min(cube, vector) of the kinds that are set
//     (on the stream, else on its device, see below),
//     0 when none is set (no cap). The cap is captured at enqueue, like every
//     other input of a task (see Note [Ops run on streams]).
// A device limit (set_device_limit) is the default of every stream of that
// device: a kind the stream does not set itself takes the device's value, and
// a kind neither sets is unlimited. get_device_limit reports the device's
// coreCount for a kind it does not set.
// Limits are keyed by (device, StreamId); StreamIds are never reused (not
// even for external streams), so a limit never leaks to another stream.
#pragma once

#include <cstdint>

#include "core/NPUStream.h"

namespace c10_npu::limits {

enum class Kind : int { kCube = 0, kVector = 1 };

// Sets one kind of limit for `stream`. value: 1..coreCount of the stream's
// device; anything else raises "Expected a core number in [1, N] ...".
// Thread-safe.
void setStreamLimit(const NPUStream& stream, Kind kind, int64_t value);

// Removes both limits of `stream`. Thread-safe.
void resetStreamLimit(const NPUStream& stream);

// The effective limit: the stream's value, else its device's, else the
// device's coreCount.
// Thread-safe.
int getStreamLimit(const NPUStream& stream, Kind kind);

// Sets one kind of limit for every stream of `device` that does not set it
// itself. value: 1..coreCount of the device; anything else raises like
// setStreamLimit. Thread-safe.
void setDeviceLimit(c10::DeviceIndex device, Kind kind, int64_t value);

// The device's limit of `kind`, or its coreCount if unset. Thread-safe.
int getDeviceLimit(c10::DeviceIndex device, Kind kind);

// Intra-op thread cap for kernels on `stream`; 0 = no cap. Hot path: one
// relaxed atomic load when no limit was ever set. Thread-safe.
int intraOpThreads(const NPUStream& stream);

}  // namespace c10_npu::limits
