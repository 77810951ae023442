// The C++ meta kernels of ATen ops, for output metadata without Python.
// Internal to csrc/aten.
//
// Note [C++ meta kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~
// At `import torch`, torch/_meta_registrations.py registers Python Meta
// kernels for some 600 ATen ops over their C++ ones, which stay compiled but
// inactive. Those Python kernels import torch._dynamo (and sympy, some 800
// modules) at their first call, so the first op of a process that asked the
// dispatcher's Meta kernel for its output metadata took over a second. The
// C++ meta functions are still exported as at::meta::<name> (one per op that
// has a C++ Meta kernel: every structured kernel, TensorIterator ops,
// reductions, the matmul family, fill_/zero_, views); a table of them is
// generated at build time from torch's headers (gen_meta_functions.py). At an
// op's first call (OpInfo), the op path picks the one whose C++ signature
// matches the op's schema, if exactly one does, and from then on computes
// the op's output metadata with it; ops without one (or with an ambiguous
// match) keep the dispatcher's Meta kernel, Python or not.
//
// These are the kernels PyTorch itself runs as Meta kernels when no Python
// overrides them, and for structured kernels the very code that sizes the
// CPU kernel's outputs, so their results agree with the CPU kernel at least
// as well as the Python ones. They read the same inputs as any meta kernel
// (tensor metadata, wrapped-number flags, argument values, the default
// dtype), so the cache key of Note [Output metadata cache] covers them.
//
// NPU_CPP_META=0 in the environment turns them off (every op uses the
// dispatcher's Meta kernel), to compare the two.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

namespace c10_npu::aten::detail {

// The C++ meta kernel of `op` (boxed), or nullopt if PyTorch exports none
// that matches its schema unambiguously. Cheap after the first call of any
// op (an index is built once); the result is meant to be kept per op.
// Thread-safe.
std::optional<c10::KernelFunction> cppMetaKernel(const c10::OperatorHandle& op);

// Whether NPU_CPP_META allows them; raises c10::Error naming a bad value
// (also at every later call). The backend's initialisation calls it (Note
// [Configuration is validated at initialisation]). Thread-safe.
bool cppMetaKernelsEnabled();

}  // namespace c10_npu::aten::detail
