// The synchronous op path: ops whose outputs cannot be known without the
// data (no meta kernel, data-dependent shapes, non-tensor results) run their
// CPU kernel as a task, the host waits for it, and fresh results are copied to
// the device. See Note [The synchronous op path] in SynchronousOp.cpp.
// Internal to csrc/aten.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "aten/OpArgs.h"
#include "aten/OpPlan.h"
#include "core/NPUStream.h"

namespace c10_npu::aten::detail {

// Runs `op` with the arguments on top of `stack` on `device`'s current
// stream, waits for it and replaces the arguments by the results. Raises the
// kernel's failure. Thread-safe (per stack).
void runSynchronously(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex device,
                      const OpInfo& info);

// Whether the op writes (in place or out=) a tensor in which several
// elements share one memory location; such an op runs synchronously (Note
// [Writes through overlapping tensors run synchronously] in
// SynchronousOp.cpp). Cheap for dense tensors. Thread-safe.
bool writesOverlappingMemory(const Stack& args, const OpInfo& info);

// Writes a host result (a CPU tensor the host owns, or an alias of device
// memory read in stream order) into fresh device memory on `stream`, by a
// copy task queued there. Thread-safe.
at::Tensor resultToNpu(const at::Tensor& r, const NPUStream& stream, c10::DeviceIndex device);

}  // namespace c10_npu::aten::detail
