// Matrix products of half tensors (mm, addmm, bmm, baddbmm, addbmm) on npu,
// computed in float.
//
// Note [Half matrix products compute in float]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Why: the generic op path runs an op's CPU kernel, and PyTorch's CPU kernel
// of a float16 matrix product, on a CPU without native half arithmetic, is a
// scalar loop: 640x4096 @ 4096x2048 took 61 s where float32 took 0.3 s on
// our CI machine. Mixed-precision training (torch.autocast("npu") makes
// every linear and matmul a half product) therefore crawled: torch_npu's
// test_graph_make_graphed_callables_with_amp_cache_disabled_allow_unused_input
// ran for hours instead of seconds, which looked like a hang.
//
// What: when every tensor argument of one of these functional ops is a half
// npu tensor, the op is ONE task (Note [Kernels composed of CPU ops]) that
// widens the operands to float, runs the same op's CPU kernel (a BLAS sgemm)
// and rounds the result into the half output once. That is CUDA's definition
// of a half GEMM (products accumulated in float, one rounding at the end);
// the values can differ from the CPU kernel's in the last bit where its
// summation order differs. The output's shape and strides come from the op's
// meta kernel as on the generic path (Note [Output metadata cache]), on the
// calling thread; arguments it refuses go to the generic path, which reports
// them as for any dtype. Anything else (other dtypes,
// mixed dtypes, empty operands, out= and in-place variants) takes the generic
// op path unchanged.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "aten/AsyncFallback.h"
#include "aten/HostMathTask.h"
#include "aten/OpArgs.h"
#include "aten/OpLauncher.h"
#include "aten/OpObservers.h"
#include "aten/OpPlan.h"
#include "aten/OutputMetadata.h"
#include "aten/flopcount/CountedProducts.h"
#include "core/NPUStream.h"

namespace c10_npu::aten {
namespace {

using detail::Stack;

// True if every tensor argument among `args` is a non-empty, strided half
// npu tensor (and there is one).
bool allHalfOperands(c10::ArrayRef<c10::IValue> args) {
  bool any = false;
  for (const c10::IValue& v : args) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.scalar_type() != at::kHalf || !t.is_privateuseone() ||
        t.layout() != c10::kStrided || t.numel() == 0) {
      return false;
    }
    any = true;
  }
  return any;
}

// Boxed kernel of the functional half products. See Note [Half matrix
// products compute in float].
void halfProductInFloat(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                        Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, nargs);
  if (!allHalfOperands(args)) {
    detail::runGenericOp(op, stack);
    return;
  }
  // The generic path's output metadata (C++ meta kernel, cached per
  // argument signature); none means a call the meta kernel refuses, which
  // the generic path reports as for every dtype.
  const Stack argStack(args.begin(), args.end());
  const auto meta = detail::outputMetadata(op, argStack, detail::opInfo(op));
  if (meta == nullptr) {
    detail::runGenericOp(op, stack);
    return;
  }
  const detail::TensorMeta& result = meta->returns.at(0).at(0);
  // The task gets the operands as CPU views (launchHostMath) and the other
  // arguments as they are; `pattern` keeps their order, with None in place
  // of each operand so that the task holds no npu tensor.
  std::vector<at::Tensor> operands;
  std::vector<c10::IValue> pattern;
  for (const c10::IValue& v : args) {
    if (v.isTensor()) operands.push_back(v.toTensor());
    pattern.push_back(v.isTensor() ? c10::IValue() : v);
  }
  const c10::DeviceIndex device = commonNpuDevice(op.schema().name().c_str(), operands);
  // Note [Op observers]: the generic path observes the other calls.
  const uint32_t observers = detail::activeOpObservers();
  std::optional<CountedProduct> product;
  if ((observers & detail::kFlopCount) != 0) [[unlikely]] product = countedProduct(op, args);
  at::Tensor out = emptyNpu(result.sizes, result.strides, at::kHalf, device);
  if (out.numel() != 0) {
    launchHostMath(getCurrentNPUStream(device), op.schema().name().c_str(), operands, {out},
                   [op, pattern = std::move(pattern)](
                       const HostTensors& in) -> HostTensors {
                     Stack s;
                     size_t next = 0;
                     for (const c10::IValue& v : pattern) {
                       if (v.isNone()) {
                         s.emplace_back(widened(in[next++]));
                       } else {
                         s.push_back(v);
                       }
                     }
                     op.redispatchBoxed(detail::kCpuKeys, &s);
                     return {s.at(0).toTensor()};
                   });
  }
  if (observers != 0) [[unlikely]] {
    if (product.has_value()) detail::countFlops(observers, [&] { return product->flops(); });
    detail::logOpPath(observers, op.schema().name().c_str(), /*async=*/true, device);
  }
  torch::jit::drop(*stack, nargs);
  stack->emplace_back(std::move(out));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"mm", "addmm", "bmm", "baddbmm", "addbmm"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&halfProductInFloat>());
  }
}

}  // namespace c10_npu::aten
