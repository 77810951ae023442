// The per-device registry of external streams and the rules that apply to
// them. Layer: framework core.
//
// An external stream is a runtime stream created by another library and
// wrapped by PyTorch (torch_npu.npu.ExternalStream / getStreamFromExternal).
// PyTorch never owns it: the other library destroys it, and the registry
// learns of that through npurt's stream-destroy notification, so the entry is
// dropped and any NPUStream still naming it raises on use.
//
// Note [External stream modes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// compat (default): torch_npu's behaviour. Ops launched while an external
//   stream is current run on it, and device-wide synchronize covers it, but
//   stream synchronize/query, event record/wait, record_stream and the queue's
//   event tasks refuse it with torch_npu's messages.
// full: the task queue tracks external streams like managed ones, so all of
//   the above work with the same ordering guarantees.
// Chosen by TORCH_NPU_EXTERNAL_STREAM_MODE=compat|full at start-up and by
// setMode() at run time.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <utility>

#include "npurt/npurt.h"

namespace c10_npu {
class NPUStream;
}

namespace c10_npu::external {

enum class Mode { kCompat = 0, kFull = 1 };

// Current mode. Thread-safe (atomic).
Mode mode();
// Changes the mode for all threads. Thread-safe.
void setMode(Mode m);

// Registers (or finds) `handle` and returns (device, StreamId). device -1 takes
// the device the handle belongs to; another device than the handle's raises.
// nullptr, garbage and destroyed handles raise. Thread-safe.
std::pair<c10::DeviceIndex, c10::StreamId> registerStream(npuStream_t handle,
                                                          c10::DeviceIndex device);

// The runtime handle for an external id; raises "Unrecognized external NPU
// stream" for ids never registered and a clear error for destroyed streams.
// Thread-safe.
npuStream_t lookup(c10::DeviceIndex device, c10::StreamId id);

// In compat mode raises torch_npu's refusal for `api` on an external stream;
// does nothing in full mode or for managed streams. Thread-safe.
void checkManagedOnly(const NPUStream& stream, const char* api);

// In compat mode raises torch_npu's refusal of `api` (e.g.
// "ProcessGroupHCCL::collective") when the current stream of `device` is
// external ("... This path requires a torch_npu-managed current stream.");
// does nothing in full mode. Thread-safe.
void checkCurrentStreamNotExternal(c10::DeviceIndex device, const char* api);

// Refusal of NPUStream::stream() for an external stream under
// PER_STREAM_QUEUE=1 in compat mode. Thread-safe.
void checkRawHandleAccess(const NPUStream& stream);

}  // namespace c10_npu::external
