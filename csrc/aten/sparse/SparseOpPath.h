// The sparse op path (SparseOpPath.cpp; Note [The sparse op path]).
// Internal to csrc/aten.
#pragma once

namespace c10_npu::aten::sparse {

// Registers the sparse op path as the sparse npu kernel of the ATen ops that
// would otherwise run PyTorch's CompositeExplicitAutogradNonFunctional
// kernel on sparse npu tensors (Note [Structured ops of sparse tensors]).
// Call after every sparse npu kernel is registered. Idempotent; thread-safe.
void routeCompositeOpsToSparsePath();

}  // namespace c10_npu::aten::sparse
