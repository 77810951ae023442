// The kernels of torch.nn.SyncBatchNorm for npu tensors: batch_norm_stats,
// batch_norm_gather_stats(_with_counts), batch_norm_elemt (+ out),
// batch_norm_backward_reduce and batch_norm_backward_elemt.
//
// Note [SyncBatchNorm kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Why: torch.nn.SyncBatchNorm (torch/nn/modules/_functions.py) normalises
// over the batch of every rank: each rank computes its per-channel mean and
// invstd (batch_norm_stats), the ranks all-gather them with their counts, each
// combines them (batch_norm_gather_stats_with_counts, which also updates the
// running statistics) and normalises its own part (batch_norm_elemt); the
// backward reduces dy locally (batch_norm_backward_reduce), all-reduces the
// two sums and applies them (batch_norm_backward_elemt). PyTorch implements
// these ops for CUDA only (torch_npu: op-plugin kernels), so the generic op
// path, which runs CPU kernels, had nothing to run (Note [Ops without a CPU
// kernel] in OpPlan.cpp).
//
// What: each op is ONE task of CPU math (Note [Kernels composed of CPU ops]),
// with CUDA's definitions and dtypes:
//  - the channel is dimension 1; statistics reduce over every other one;
//  - invstd = 1 / sqrt(var + eps) with the biased variance, and 0 where
//    var and eps are both 0 (CUDA's InvStd);
//  - gathering skips ranks whose count is 0 (an empty input on that rank)
//    and updates the running variance with the unbiased variance of the
//    whole batch; the gathered statistics have the dtypes of `mean` and
//    `invstd`;
//  - half and bfloat16 are computed in float; batch_norm_stats returns float
//    statistics for them, as CUDA (its accumulate type).
// The combination of ranks is computed in closed form (sum of counts, sum of
// count-weighted means, then the within- and between-rank variances) instead
// of CUDA's running merge; the two agree up to float rounding.
#include <ATen/Functions.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "aten/HostMathTask.h"
#include "aten/OpLauncher.h"
#include "core/NPUException.h"
#include "core/NPUStream.h"

namespace c10_npu::aten {
namespace {

constexpr const char* kStats = "aten::batch_norm_stats";
constexpr const char* kGather = "aten::batch_norm_gather_stats_with_counts";
constexpr const char* kElemt = "aten::batch_norm_elemt";
constexpr const char* kBackwardReduce = "aten::batch_norm_backward_reduce";
constexpr const char* kBackwardElemt = "aten::batch_norm_backward_elemt";

at::Tensor orUndefined(const std::optional<at::Tensor>& t) { return t.value_or(at::Tensor()); }

// Checks that `input` is a floating tensor of shape (N, C, ...); returns C.
int64_t checkInput(const char* op, const char* name, const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, op, ": expected ", name,
              " of at least 2 dimensions (N, C, ...), but got a tensor of shape ", input.sizes(),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, ": expected a floating ", name,
              ", but got ", input.scalar_type(), NPU_ERROR_SUFFIX);
  return input.size(1);
}

// Checks that each defined tensor of `tensors` is a floating tensor of shape
// `sizes`; `names` has one entry per tensor.
void checkShapes(const char* op, std::initializer_list<const char*> names,
                 c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef sizes) {
  const auto* name = names.begin();
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!t.defined() || t.sizes() == sizes, op, ": expected ", *name, " of shape ", sizes,
                ", but got ", t.sizes(), NPU_ERROR_SUFFIX);
    TORCH_CHECK(!t.defined() || at::isFloatingType(t.scalar_type()), op, ": expected a floating ",
                *name, ", but got ", t.scalar_type(), NPU_ERROR_SUFFIX);
    ++name;
  }
}

// A fresh contiguous npu vector of `size` elements.
at::Tensor emptyVector(int64_t size, c10::ScalarType dtype, c10::DeviceIndex device) {
  return emptyNpu({size}, {1}, dtype, device);
}

// An output shaped and laid out like `input` (CUDA: empty_like with the
// suggested memory format, so channels-last inputs give channels-last outputs).
at::Tensor emptyLikeInput(const at::Tensor& input, c10::DeviceIndex device) {
  const at::Tensor layout =
      at::empty_like(input, input.options().device(c10::kMeta), input.suggest_memory_format());
  return emptyNpu(input.sizes(), layout.strides(), input.scalar_type(), device);
}

// --- The math (inside tasks, CPU tensors) -----------------------------------

// The dimensions statistics reduce over: every one but the channel's.
std::vector<int64_t> reducedDims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against `input` (C at dim 1).
at::Tensor perChannel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(static_cast<size_t>(input.dim()), 1);
  shape[1] = input.size(1);
  return v.reshape(shape);
}

// CUDA's InvStd: 1 / sqrt(var + eps), and 0 where var and eps are both 0.
at::Tensor invStd(const at::Tensor& var, double eps) {
  if (eps != 0) return (var + eps).rsqrt();
  return at::where(var == 0, at::zeros_like(var), var.rsqrt());
}

HostTensors stats(const HostTensors& in, double eps) {
  const at::Tensor x = widened(in[0]);
  auto [var, mean] = at::var_mean(x, reducedDims(x), /*correction=*/0, /*keepdim=*/false);
  return {std::move(mean), invStd(var, eps)};
}

// in: mean [W, C], invstd [W, C], counts [W], running_mean, running_var.
// out: mean, invstd, running_mean, running_var.
HostTensors gather(const HostTensors& in, double momentum, double eps) {
  const at::Tensor mean = widened(in[0]), invstd = widened(in[1]);
  const at::Tensor counts = in[2].to(mean.scalar_type()).reshape({-1, 1});
  const at::Tensor present = counts > 0;  // ranks with an empty input add nothing
  const at::Tensor zero = at::zeros({}, mean.options());
  const at::Tensor weight = at::where(present, counts, zero);
  const at::Tensor n = weight.sum(0);
  const at::Tensor m = at::where(present, mean, zero);
  const at::Tensor globalMean = (weight * m).sum(0) / n;
  // Each rank's biased variance back from its invstd, times its count, plus
  // the spread of its mean around the global one.
  const at::Tensor rankVar = at::where(present, invstd.pow(-2) - eps, zero);
  const at::Tensor varN = (weight * (rankVar + (m - globalMean).pow(2))).sum(0);
  HostTensors out{globalMean, (varN / n + eps).rsqrt(), at::Tensor(), at::Tensor()};
  if (in[3].defined()) out[2] = widened(in[3]) * (1 - momentum) + globalMean * momentum;
  if (in[4].defined()) out[3] = widened(in[4]) * (1 - momentum) + varN / (n - 1) * momentum;
  return out;
}

// in: input, weight, bias, mean, invstd.
HostTensors elemt(const HostTensors& in) {
  const at::Tensor x = widened(in[0]);
  at::Tensor scale = perChannel(widened(in[4]), x);
  if (in[1].defined()) scale = scale * perChannel(widened(in[1]), x);
  at::Tensor y = (x - perChannel(widened(in[3]), x)) * scale;
  if (in[2].defined()) y = y + perChannel(widened(in[2]), x);
  return {std::move(y)};
}

// in: grad_out, input, mean, invstd. out: sum_dy, sum_dy_xmu, grad_weight,
// grad_bias (each only if its output is wanted; the task skips the others).
HostTensors backwardReduce(const HostTensors& in) {
  const at::Tensor dy = widened(in[0]), x = widened(in[1]);
  const std::vector<int64_t> dims = reducedDims(x);
  at::Tensor sumDy = dy.sum(dims);
  at::Tensor sumDyXmu = (dy * (x - perChannel(widened(in[2]), x))).sum(dims);
  at::Tensor gradWeight = sumDyXmu * widened(in[3]);
  return {sumDy, std::move(sumDyXmu), std::move(gradWeight), sumDy};
}

// in: grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count.
HostTensors backwardElemt(const HostTensors& in) {
  const at::Tensor dy = widened(in[0]), x = widened(in[1]);
  const at::Tensor invstd = widened(in[3]);
  const at::Tensor n = in[7].sum().to(invstd.scalar_type());
  const at::Tensor meanDy = widened(in[5]) / n;
  const at::Tensor meanDyXmu = widened(in[6]) / n;
  const at::Tensor factor1 = invstd * invstd * meanDyXmu;
  const at::Tensor factor2 = in[4].defined() ? widened(in[4]) * invstd : invstd;
  at::Tensor dx = (dy - perChannel(meanDy, x) - (x - perChannel(widened(in[2]), x)) *
                                                    perChannel(factor1, x)) *
                  perChannel(factor2, x);
  return {std::move(dx)};
}

// --- The ops (calling thread: checks, outputs, one task) --------------------

std::tuple<at::Tensor, at::Tensor> batchNormStats(const at::Tensor& input, double eps) {
  const c10::DeviceIndex device = commonNpuDevice(kStats, {input});
  const int64_t channels = checkInput(kStats, "input", input);
  const c10::ScalarType dtype = at::toOpMathType(input.scalar_type());
  at::Tensor mean = emptyVector(channels, dtype, device);
  at::Tensor invstd = emptyVector(channels, dtype, device);
  launchHostMath(getCurrentNPUStream(device), kStats, {input}, {mean, invstd},
                 [eps](const HostTensors& in) { return stats(in, eps); });
  return {mean, invstd};
}

std::tuple<at::Tensor, at::Tensor> gatherStats(const at::Tensor& input, const at::Tensor& mean,
                                               const at::Tensor& invstd,
                                               const at::Tensor& runningMean,
                                               const at::Tensor& runningVar, double momentum,
                                               double eps, const at::Tensor& counts) {
  const c10::DeviceIndex device =
      commonNpuDevice(kGather, {input, mean, invstd, runningMean, runningVar, counts});
  TORCH_CHECK(mean.dim() == 2, kGather,
              ": expected mean of shape [world_size, channels], but got ", mean.sizes(),
              NPU_ERROR_SUFFIX);
  const int64_t ranks = mean.size(0), channels = mean.size(1);
  checkShapes(kGather, {"mean", "invstd"}, {mean, invstd}, {ranks, channels});
  checkShapes(kGather, {"running_mean", "running_var"}, {runningMean, runningVar}, {channels});
  TORCH_CHECK(counts.numel() == ranks, kGather, ": expected one count per row of mean (",
              ranks, "), but got counts of shape ", counts.sizes(), NPU_ERROR_SUFFIX);
  at::Tensor outMean = emptyVector(channels, mean.scalar_type(), device);
  at::Tensor outInvstd = emptyVector(channels, invstd.scalar_type(), device);
  launchHostMath(getCurrentNPUStream(device), kGather,
                 {mean, invstd, counts, runningMean, runningVar},
                 {outMean, outInvstd, runningMean, runningVar},
                 [momentum, eps](const HostTensors& in) { return gather(in, momentum, eps); });
  return {outMean, outInvstd};
}

std::tuple<at::Tensor, at::Tensor> batchNormGatherStatsWithCounts(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& runningMean, const std::optional<at::Tensor>& runningVar,
    double momentum, double eps, const at::Tensor& counts) {
  TORCH_CHECK(at::isFloatingType(counts.scalar_type()) || at::isIntegralType(counts.scalar_type(),
                                                                             /*includeBool=*/false),
              kGather, ": expected counts of a numeric dtype, but got ", counts.scalar_type(),
              NPU_ERROR_SUFFIX);
  return gatherStats(input, mean, invstd, orUndefined(runningMean), orUndefined(runningVar),
                     momentum, eps, counts);
}

// CUDA's batch_norm_gather_stats: every rank counted `count` elements.
std::tuple<at::Tensor, at::Tensor> batchNormGatherStats(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& runningMean, const std::optional<at::Tensor>& runningVar,
    double momentum, double eps, int64_t count) {
  TORCH_CHECK(mean.dim() == 2, "aten::batch_norm_gather_stats",
              ": expected mean of shape [world_size, channels], but got ", mean.sizes(),
              NPU_ERROR_SUFFIX);
  const at::Tensor counts = at::full({mean.size(0)}, static_cast<double>(count),
                                     mean.options().dtype(at::toOpMathType(mean.scalar_type())));
  return gatherStats(input, mean, invstd, orUndefined(runningMean), orUndefined(runningVar),
                     momentum, eps, counts);
}

at::Tensor& batchNormElemtOut(const at::Tensor& input, const std::optional<at::Tensor>& weightOpt,
                              const std::optional<at::Tensor>& biasOpt, const at::Tensor& mean,
                              const at::Tensor& invstd, double /*eps: in invstd*/,
                              at::Tensor& out) {
  const at::Tensor weight = orUndefined(weightOpt), bias = orUndefined(biasOpt);
  const c10::DeviceIndex device = commonNpuDevice(kElemt, {input, weight, bias, mean, invstd, out});
  const int64_t channels = checkInput(kElemt, "input", input);
  checkShapes(kElemt, {"weight", "bias", "mean", "invstd"}, {weight, bias, mean, invstd},
              {channels});
  TORCH_CHECK(out.sizes() == input.sizes(), kElemt, ": expected out of the shape of input (",
              input.sizes(), "), but got ", out.sizes(), NPU_ERROR_SUFFIX);
  launchHostMath(getCurrentNPUStream(device), kElemt, {input, weight, bias, mean, invstd}, {out},
                 elemt);
  return out;
}

at::Tensor batchNormElemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                          const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                          const at::Tensor& invstd, double eps) {
  const c10::DeviceIndex device = commonNpuDevice(kElemt, {input});
  checkInput(kElemt, "input", input);
  at::Tensor out = emptyLikeInput(input, device);
  return batchNormElemtOut(input, weight, bias, mean, invstd, eps, out);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batchNormBackwardReduce(
    const at::Tensor& gradOut, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weightOpt, bool inputG,
    bool weightG, bool biasG) {
  const at::Tensor weight = orUndefined(weightOpt);
  const c10::DeviceIndex device =
      commonNpuDevice(kBackwardReduce, {gradOut, input, mean, invstd, weight});
  const int64_t channels = checkInput(kBackwardReduce, "input", input);
  TORCH_CHECK(gradOut.sizes() == input.sizes(), kBackwardReduce,
              ": expected grad_out of the shape of input (", input.sizes(), "), but got ",
              gradOut.sizes(), NPU_ERROR_SUFFIX);
  checkShapes(kBackwardReduce, {"mean", "invstd", "weight"}, {mean, invstd, weight}, {channels});
  // CUDA: the two sums take mean's dtype, the parameter gradients weight's.
  const c10::ScalarType paramDtype = weight.defined() ? weight.scalar_type() : mean.scalar_type();
  at::Tensor sumDy, sumDyXmu, gradWeight, gradBias;
  if (inputG) {
    sumDy = emptyVector(channels, mean.scalar_type(), device);
    sumDyXmu = emptyVector(channels, mean.scalar_type(), device);
  }
  if (weightG) gradWeight = emptyVector(channels, paramDtype, device);
  if (biasG) gradBias = emptyVector(channels, paramDtype, device);
  if (!inputG && !weightG && !biasG) return {};
  launchHostMath(getCurrentNPUStream(device), kBackwardReduce, {gradOut, input, mean, invstd},
                 {sumDy, sumDyXmu, gradWeight, gradBias}, backwardReduce);
  return {sumDy, sumDyXmu, gradWeight, gradBias};
}

at::Tensor batchNormBackwardElemt(const at::Tensor& gradOut, const at::Tensor& input,
                                  const at::Tensor& mean, const at::Tensor& invstd,
                                  const std::optional<at::Tensor>& weightOpt,
                                  const at::Tensor& sumDy, const at::Tensor& sumDyXmu,
                                  const at::Tensor& count) {
  const at::Tensor weight = orUndefined(weightOpt);
  const c10::DeviceIndex device = commonNpuDevice(
      kBackwardElemt, {gradOut, input, mean, invstd, weight, sumDy, sumDyXmu, count});
  const int64_t channels = checkInput(kBackwardElemt, "input", input);
  TORCH_CHECK(gradOut.sizes() == input.sizes(), kBackwardElemt,
              ": expected grad_out of the shape of input (", input.sizes(), "), but got ",
              gradOut.sizes(), NPU_ERROR_SUFFIX);
  checkShapes(kBackwardElemt, {"mean", "invstd", "weight", "sum_dy", "sum_dy_xmu"},
              {mean, invstd, weight, sumDy, sumDyXmu}, {channels});
  TORCH_CHECK(!at::isComplexType(count.scalar_type()) && count.scalar_type() != at::kBool,
              kBackwardElemt, ": expected a count tensor of a real dtype, but got ",
              count.scalar_type(), NPU_ERROR_SUFFIX);
  at::Tensor gradInput = emptyLikeInput(input, device);
  launchHostMath(getCurrentNPUStream(device), kBackwardElemt,
                 {gradOut, input, mean, invstd, weight, sumDy, sumDyXmu, count}, {gradInput},
                 backwardElemt);
  return gradInput;
}

}  // namespace

// See Note [SyncBatchNorm kernels]. The out= variants of the other ops are
// PyTorch's composite ones (the functional op, then a copy).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("batch_norm_stats", batchNormStats);
  m.impl("batch_norm_gather_stats", batchNormGatherStats);
  m.impl("batch_norm_gather_stats_with_counts", batchNormGatherStatsWithCounts);
  m.impl("batch_norm_elemt", batchNormElemt);
  m.impl("batch_norm_elemt.out", batchNormElemtOut);
  m.impl("batch_norm_backward_reduce", batchNormBackwardReduce);
  m.impl("batch_norm_backward_elemt", batchNormBackwardElemt);
}

}  // namespace c10_npu::aten
