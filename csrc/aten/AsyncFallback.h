// The generic op path as a function, for kernels of this folder that run an
// op through it and then adjust what it returned (BatchNorm.cpp). See
// AsyncFallback.cpp. Internal to csrc/aten.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "aten/OpArgs.h"

namespace c10_npu::aten::detail {

// Runs `op` with the arguments on top of `stack` as the PrivateUse1 fallback
// does (asynchronously when its outputs can be known in advance) and
// replaces the arguments by the results. Thread-safe (per stack).
void runGenericOp(const c10::OperatorHandle& op, Stack* stack);

// Registers the generic op path as the npu kernel of the ATen ops that would
// otherwise run PyTorch's CompositeExplicitAutogradNonFunctional kernel (Note
// [Structured ops take the op path] in AsyncFallback.cpp). Call after every
// npu kernel of this library is registered (the extension module's
// initialisation does). Also routes those ops of sparse npu tensors to the
// sparse op path (sparse/SparseOpPath.h). Idempotent; thread-safe.
void routeCompositeOpsToOpPath();

}  // namespace c10_npu::aten::detail
