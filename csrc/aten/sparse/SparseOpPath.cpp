// The sparse op path: ops on sparse npu tensors that have no kernel of ours
// (sparse/SparseKernels.cpp), and the conversions of dense npu tensors to
// sparse layouts. See Note [Sparse npu tensors] in SparseTensors.h and Note
// [The sparse op path] below.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aten/OpArgs.h"
#include "aten/OpLauncher.h"
#include "aten/SynchronousOp.h"
#include "aten/sparse/SparseOpPath.h"
#include "aten/sparse/SparseTensors.h"
#include "core/HostSync.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"

namespace c10_npu::aten::sparse {
namespace {

using detail::IValue;
using detail::Stack;

// Note [The sparse op path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Like the dense synchronous path (Note [The synchronous op path]), the
// op's CPU kernel runs as a task on the current stream, so that it reads
// device memory in stream order; the host waits for it (a host sync, noted
// before anything is queued: Note [Host syncs of the op path]); results are
// written to fresh device memory by copy tasks queued behind it. What
// differs is how arguments are handed to the kernel and results taken back:
//  - a sparse npu argument becomes a CPU sparse tensor over CPU aliases of
//    its components (cpuTwin), validated first: CPU kernels trust that
//    indices lie within the sizes, which PyTorch checks only on request;
//  - an argument the op writes (in-place and out= ops) is handed over as a
//    CPU copy, because sparse kernels replace the components of their output
//    and resize them (a CPU alias of device memory cannot grow); afterwards
//    the npu argument takes the copy's sizes and contents (adopt, writeBack);
//  - a result that is a CPU twin of an argument is that npu argument; any
//    other result is copied to fresh npu memory, sparse ones component by
//    component (toNpu).
struct Outcome {
  struct Handed {
    at::Tensor cpu;  // what the kernel got
    at::Tensor npu;  // the argument it stands for
    bool written;
  };
  Stack results;
  std::vector<Handed> handed;  // in argument order

  // The npu argument `cpu` stands for, or nullptr.
  const at::Tensor* npuOf(const at::Tensor& cpu) const {
    for (const Handed& h : handed) {
      if (h.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return &h.npu;
    }
    return nullptr;
  }
};

bool writes(const c10::FunctionSchema& schema, size_t i) {
  const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
  return alias != nullptr && alias->isWrite();
}

// The device of the op's npu tensors; raises like the dense op path for
// tensors on several devices or non-scalar CPU tensors among them.
c10::DeviceIndex opDevice(const c10::FunctionSchema& schema, const Stack& args) {
  c10::DeviceIndex device = -1;
  auto check = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().is_cpu()) {
      TORCH_CHECK(t.dim() == 0, "Expected all tensors to be on the same device, but found at ",
                  "least two devices, npu and cpu! (when checking arguments of ", schema.name(),
                  ")", NPU_ERROR_SUFFIX);
      return;
    }
    TORCH_CHECK(detail::isNpu(t), "Expected all tensors to be on the same device, but found ",
                "at least two devices, npu and ", t.device(), "! (when checking arguments of ",
                schema.name(), ")", NPU_ERROR_SUFFIX);
    TORCH_CHECK(device == -1 || device == t.device().index(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                "npu:", static_cast<int>(device), " and npu:", static_cast<int>(t.device().index()),
                "! (when checking arguments of ", schema.name(), ")", NPU_ERROR_SUFFIX);
    device = t.device().index();
  };
  for (const IValue& a : args) {
    if (a.isTensor()) {
      check(a.toTensor());
    } else if (a.isList()) {
      for (const IValue& e : a.toListRef()) {
        if (e.isTensor()) check(e.toTensor());
      }
    }
  }
  TORCH_CHECK(device >= 0, schema.name(), " got no npu tensor", NPU_ERROR_SUFFIX);
  return device;
}

// The device memory the kernel reads: every npu argument's (components').
TaskAccess kernelAccess(const Stack& args) {
  TaskAccess access;
  for (const IValue& a : args) {
    detail::forEachNpuTensor(a, [&](const at::Tensor& t) {
      if (t.layout() == c10::kStrided) {
        access.read(t);
      } else {
        for (const at::Tensor& c : components(t)) access.read(c);
      }
    });
  }
  return access;
}

// The CPU tensor the kernel gets for npu argument `t`. Inside the task.
//
// Note [Sparse kernels read requires_grad]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Some sparse CPU kernels decide what to compute from their inputs'
// requires_grad: _sparse_mm_reduce_impl computes the argmax/argmin indices
// its backward reads only for inputs that require grad, and its backward
// reads them unchecked (an empty tensor is read out of bounds). So the
// kernel's argument requires grad when the npu argument does; the task runs
// below autograd (runKernel in OpLauncher.h), so no graph is recorded.
at::Tensor kernelArgument(const at::Tensor& t, bool written) {
  at::Tensor cpu;
  if (t.layout() != c10::kStrided) {
    cpu = cpuTwin(t, written);
  } else {
    at::Tensor alias = cpuAlias(t);
    cpu = written ? alias.clone(at::MemoryFormat::Preserve) : alias;
  }
  if (t.requires_grad()) cpu.requires_grad_(true);
  return cpu;
}

// Writes the kernel's copy of a written dense argument back, in stream order.
void writeBack(const at::Tensor& npu, const at::Tensor& host, const NPUStream& stream) {
  if (npu.sizes() != host.sizes()) npu.resize_(host.sizes());
  TaskAccess access;
  access.write(npu);
  // `npu` is held by the task: it may belong to another stream.
  launchKernel(stream, "aten::copy_", std::move(access),
               [dst = npu, src = host]() { cpuAlias(dst).copy_(src); });
}

void runSparseOp(const c10::OperatorHandle& op, Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  Stack args(stack->end() - nargs, stack->end());
  const c10::DeviceIndex device = opDevice(schema, args);
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  // Before anything is queued: Note [Host syncs of the op path].
  noteHostSync(schema.name().c_str());
  const NPUStream stream = getCurrentNPUStream(device);
  std::vector<bool> written(nargs);
  for (size_t i = 0; i < nargs; ++i) written[i] = writes(schema, i);

  auto outcome = std::make_shared<Outcome>();
  // Note [Kernels the host waits for raise at the call] in OpLauncher.h.
  launchKernelAndWait(stream, schema.name().c_str(), kernelAccess(args),
                      [op, args, written, outcome] {
                        Stack s;
                        for (size_t i = 0; i < args.size(); ++i) {
                          s.push_back(detail::mapTensors(
                              args[i],
                              [&](const at::Tensor& t) {
                                at::Tensor cpu = kernelArgument(t, written[i]);
                                outcome->handed.push_back({cpu, t, written[i]});
                                return cpu;
                              },
                              c10::DeviceType::CPU));
                        }
                        op.callBoxed(&s);
                        outcome->results = std::move(s);
                      });

  // Written arguments take what the kernel left in their copies.
  for (const Outcome::Handed& h : outcome->handed) {
    if (!h.written) continue;
    if (h.npu.layout() == c10::kStrided) {
      writeBack(h.npu, h.cpu, stream);
    } else {
      adopt(h.npu, h.cpu, stream, device);
    }
  }
  auto toDevice = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined()) return r;
    if (const at::Tensor* arg = outcome->npuOf(r)) return *arg;
    if (!r.device().is_cpu()) return r;
    return r.layout() == c10::kStrided ? detail::resultToNpu(r, stream, device)
                                       : toNpu(r, stream, device);
  };
  Stack results = std::move(outcome->results);
  detail::mapResultTensors(results, toDevice);
  detail::replaceArgsWithResults(stack, nargs, results);
}

void sparseFallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, Stack* stack) {
  runSparseOp(op, stack);
}

}  // namespace

// Note [Structured ops of sparse tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Kernels for PyTorch's composite keys serve every backend key without a
// kernel of its own, the sparse ones included, ahead of the backend
// fallback. Where SparseCPU (SparseCsrCPU) has a kernel of its own, the
// composite one does something else for sparse tensors or fails: the
// CompositeExplicitAutogradNonFunctional kernels of structured ops (mul.Tensor,
// add_.Tensor, ...) build a TensorIterator, which refuses sparse layouts
// ("unsupported tensor layout: SparseCsr"); CompositeExplicitAutograd's sum
// calls sum.dim_IntList, which CSR refuses without keepdim, where sum_csr sums
// the values. So the sparse op path is registered as the sparse npu kernel of
// every op that has a sparse CPU kernel, and of every structured op, unless
// the npu has a kernel of its own (SparseKernels.cpp): the npu then runs what
// CPU runs, as the generic op path does for dense tensors (Note [Structured
// ops take the op path]).
void routeCompositeOpsToSparsePath() {
  static const bool routed = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    const std::vector<c10::OperatorName> structured = dispatcher.getAllOpNamesForDispatchKey(
        c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    const std::pair<c10::DispatchKey, c10::DispatchKey> keys[] = {
        {c10::DispatchKey::SparsePrivateUse1, c10::DispatchKey::SparseCPU},
        {c10::DispatchKey::SparseCsrPrivateUse1, c10::DispatchKey::SparseCsrCPU}};
    for (const auto& [npuKey, cpuKey] : keys) {
      // Leaked: the registrations must outlive every op call, up to exit.
      auto* lib =
          std::make_unique<torch::Library>(torch::Library::IMPL, "aten", npuKey, __FILE__, __LINE__)
              .release();
      std::vector<c10::OperatorName> names = dispatcher.getAllOpNamesForDispatchKey(cpuKey);
      names.insert(names.end(), structured.begin(), structured.end());
      for (const c10::OperatorName& name : names) {
        const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
        // hasKernelForDispatchKey also skips an op listed twice.
        if (!op.has_value() || name.name.rfind("aten::", 0) != 0 ||
            op->hasKernelForDispatchKey(npuKey)) {
          continue;
        }
        lib->impl(detail::qualifiedName(name).c_str(),
                  torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
      }
    }
    return true;
  }();
  (void)routed;
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
}

// Dense npu tensors to sparse layouts: the nnz is the data's.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_to_sparse", "_to_sparse.sparse_dim", "_to_sparse_csr",
                           "_to_sparse_csc", "_to_sparse_bsr", "_to_sparse_bsc"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
  }
}

}  // namespace c10_npu::aten::sparse
