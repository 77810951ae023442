// Convolutions of npu tensors: every nn.Conv*d and nn.ConvTranspose*d, and
// their backward.
//
// PyTorch's convolution front end (at::_convolution, below conv1d/conv2d/
// conv3d/conv_transpose*d) checks the shapes and picks an implementation by
// device; for a device it does not know it calls convolution_overrideable,
// and autograd calls convolution_backward_overrideable. Their default kernels
// only raise, and no CPU kernel exists for the generic op path to run, so
// they are implemented here: outputs are sized on the host, and one task runs
// the CPU convolution over the device memory (Note [Kernels composed of CPU
// ops] in HostMathTask.h).
//
// The arguments are checked here too (Note [Convolution arguments are checked
// at the call]).
#include <ATen/Functions.h>
#include <ATen/native/ConvUtils.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/HostMathTask.h"
#include "aten/OpLauncher.h"
#include "aten/OpObservers.h"
#include "aten/flopcount/FlopCounter.h"
#include "core/NPUException.h"
#include "core/NPUStream.h"

namespace c10_npu::aten {
namespace {

using detail::activeOpObservers;
using detail::countFlops;
using detail::logOpPath;

// Note [Convolution arguments are checked at the call]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// at::_convolution checks shapes before it calls convolution_overrideable,
// but not dtypes, and the overrideable ops can also be called directly
// (torch.ops.aten.convolution_overrideable). The CPU convolution in the task
// would reject such calls only at the next synchronize, as a task failure
// that poisons the outputs. So every argument the output sizes and the CPU
// kernel depend on is checked on the host first, and a bad call raises a
// RuntimeError at the call that names the argument; the stream never sees
// it.

constexpr const char* kForward = "aten::convolution_overrideable";
constexpr const char* kBackward = "aten::convolution_backward_overrideable";

// The convolution's parameters with one value per spatial dimension.
struct ConvParams {
  c10::DimVector stride, padding, dilation, outputPadding;
  bool transposed = false;
  int64_t groups = 1;
};

// One value per spatial dimension: a single value is repeated.
c10::DimVector expandParam(const char* op, const char* what, c10::IntArrayRef values,
                           int64_t spatial) {
  if (values.size() == 1) return c10::DimVector(spatial, values[0]);
  TORCH_CHECK(static_cast<int64_t>(values.size()) == spatial, op, ": expected ", what, " to have ",
              spatial, " elements (one per spatial dimension), but got ", values.size(),
              NPU_ERROR_SUFFIX);
  return c10::DimVector(values.begin(), values.end());
}

// Checks what does not depend on the tensors' contents (Note [Convolution
// arguments are checked at the call]) and returns the expanded parameters.
ConvParams checkConvolution(const char* op, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                            c10::IntArrayRef outputPadding, int64_t groups) {
  const int64_t dim = input.dim();
  TORCH_CHECK(dim >= 3 && dim <= 5, op, ": expected a 3-D, 4-D or 5-D input (batch, channels, ",
              "1 to 3 spatial dimensions), but got input of size ", input.sizes(),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(weight.dim() == dim, op, ": expected a ", dim, "-D weight for a ", dim,
              "-D input, but got weight of size ", weight.sizes(), NPU_ERROR_SUFFIX);
  TORCH_CHECK(groups > 0, op, ": expected groups to be positive, but got ", groups,
              NPU_ERROR_SUFFIX);
  ConvParams p;
  p.transposed = transposed;
  p.groups = groups;
  p.stride = expandParam(op, "stride", stride, dim - 2);
  p.padding = expandParam(op, "padding", padding, dim - 2);
  p.dilation = expandParam(op, "dilation", dilation, dim - 2);
  p.outputPadding = expandParam(op, "output_padding", outputPadding, dim - 2);
  for (int64_t d = 0; d < dim - 2; ++d) {
    TORCH_CHECK(p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0, op,
                ": expected positive stride and dilation and non-negative padding, but got ",
                "stride ", stride, ", dilation ", dilation, ", padding ", padding,
                NPU_ERROR_SUFFIX);
    TORCH_CHECK(p.outputPadding[d] >= 0 &&
                    (!transposed || p.outputPadding[d] < std::max(p.stride[d], p.dilation[d])),
                op, ": expected output_padding to be non-negative and smaller than stride or ",
                "dilation, but got output_padding ", outputPadding, NPU_ERROR_SUFFIX);
  }
  // Weight: [out, in / groups, k...], transposed: [in, out / groups, k...].
  const int64_t inChannels = transposed ? weight.size(0) : weight.size(1) * groups;
  const int64_t outChannels = transposed ? weight.size(1) * groups : weight.size(0);
  TORCH_CHECK(weight.size(0) % groups == 0, op, ": expected the weight's first dimension to be ",
              "divisible by groups=", groups, ", but got weight of size ", weight.sizes(),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(input.size(1) == inChannels, op, ": given groups=", groups, " and weight of size ",
              weight.sizes(), ", expected input of size ", input.sizes(), " to have ", inChannels,
              " channels, but got ", input.size(1), " channels instead", NPU_ERROR_SUFFIX);
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == outChannels), op,
              ": expected bias to be 1-D with ", outChannels, " elements, but got bias of size ",
              bias.sizes(), NPU_ERROR_SUFFIX);
  checkSameDtype(op, {"input", "weight", "bias"}, {input, weight, bias});
  return p;
}

// The output sizes of a convolution with these arguments; raises if an
// output dimension would be empty or negative.
std::vector<int64_t> outputSizes(const char* op, const at::Tensor& input, const at::Tensor& weight,
                                 const ConvParams& p) {
  std::vector<int64_t> sizes =
      p.transposed ? at::native::conv_input_size(input.sizes(), weight.sizes(), p.padding,
                                                 p.outputPadding, p.stride, p.dilation, p.groups)
                   : at::native::conv_output_size(input.sizes(), weight.sizes(), p.padding,
                                                  p.stride, p.dilation);
  for (size_t d = 2; d < sizes.size(); ++d) {
    TORCH_CHECK(sizes[d] > 0, op, ": the output of input of size ", input.sizes(),
                " and weight of size ", weight.sizes(), " with padding ", p.padding, ", stride ",
                p.stride, " and dilation ", p.dilation, " would have size ", sizes,
                ", which is too small (the kernel is larger than the padded input?)",
                NPU_ERROR_SUFFIX);
  }
  return sizes;
}

// Channels-last if the tensor (or, for the convolution's output, its input
// or weight) is, as the CPU convolution chooses.
at::MemoryFormat convFormat(const at::Tensor& input, const at::Tensor& weight) {
  for (const at::Tensor* t : {&input, &weight}) {
    const at::MemoryFormat f = t->suggest_memory_format();
    if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d) return f;
  }
  return at::MemoryFormat::Contiguous;
}

at::Tensor emptyNpuIn(c10::IntArrayRef sizes, at::MemoryFormat format, c10::ScalarType dtype,
                      c10::DeviceIndex device) {
  if (format == at::MemoryFormat::ChannelsLast && sizes.size() == 4) {
    return emptyNpu(sizes, c10::get_channels_last_strides_2d(sizes), dtype, device);
  }
  if (format == at::MemoryFormat::ChannelsLast3d && sizes.size() == 5) {
    return emptyNpu(sizes, c10::get_channels_last_strides_3d(sizes), dtype, device);
  }
  return emptyNpu(sizes, c10::contiguous_strides(sizes), dtype, device);
}

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& biasOpt,
                                   c10::IntArrayRef stride, c10::IntArrayRef padding,
                                   c10::IntArrayRef dilation, bool transposed,
                                   c10::IntArrayRef outputPadding, int64_t groups) {
  const at::Tensor bias = biasOpt.value_or(at::Tensor());
  const c10::DeviceIndex device = commonNpuDevice(kForward, {input, weight, bias});
  const ConvParams p = checkConvolution(kForward, input, weight, bias, stride, padding, dilation,
                                        transposed, outputPadding, groups);
  at::Tensor output = emptyNpuIn(outputSizes(kForward, input, weight, p), convFormat(input, weight),
                                 input.scalar_type(), device);
  if (output.numel() == 0) return output;
  launchHostMath(getCurrentNPUStream(device), kForward, {input, weight, bias}, {output},
                 [p](const HostTensors& in) -> HostTensors {
                   const std::optional<at::Tensor> b =
                       in[2].defined() ? std::optional<at::Tensor>(in[2]) : std::nullopt;
                   return {at::convolution(in[0], in[1], b, p.stride, p.padding, p.dilation,
                                           p.transposed, p.outputPadding, p.groups)};
                 });
  if (const uint32_t observers = activeOpObservers(); observers != 0) [[unlikely]] {
    // Note [Op observers]
    countFlops(observers, [&] { return FlopCounter::conv_flop(input, weight, transposed, output); });
    logOpPath(observers, kForward, /*async=*/true, device);
  }
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef outputPadding, int64_t groups, std::array<bool, 3> outputMask) {
  const c10::DeviceIndex device = commonNpuDevice(kBackward, {gradOutput, input, weight});
  const ConvParams p = checkConvolution(kBackward, input, weight, at::Tensor(), stride, padding,
                                        dilation, transposed, outputPadding, groups);
  checkSameDtype(kBackward, {"input", "grad_output"}, {input, gradOutput});
  const std::vector<int64_t> expected = outputSizes(kBackward, input, weight, p);
  TORCH_CHECK(gradOutput.sizes() == c10::IntArrayRef(expected), kBackward,
              ": expected grad_output of size ", c10::IntArrayRef(expected),
              " (the convolution's output), but got ", gradOutput.sizes(), NPU_ERROR_SUFFIX);
  const int64_t outChannels = expected[1];
  const c10::ScalarType dtype = input.scalar_type();
  at::Tensor gradInput, gradWeight, gradBias;
  if (outputMask[0]) {
    gradInput = emptyNpuIn(input.sizes(), convFormat(input, weight), dtype, device);
  }
  if (outputMask[1]) {
    gradWeight = emptyNpuIn(weight.sizes(), weight.suggest_memory_format(), dtype, device);
  }
  if (outputMask[2]) {
    gradBias = emptyNpuIn({outChannels}, at::MemoryFormat::Contiguous, dtype, device);
  }
  if (outputMask[0] || outputMask[1] || outputMask[2]) {
    launchHostMath(getCurrentNPUStream(device), kBackward, {gradOutput, input, weight},
                   {gradInput, gradWeight, gradBias},
                   [p, outputMask, outChannels](const HostTensors& in) -> HostTensors {
                     const std::vector<int64_t> biasSizes{outChannels};
                     auto [gi, gw, gb] = at::convolution_backward(
                         in[0], in[1], in[2],
                         outputMask[2] ? at::OptionalIntArrayRef(biasSizes) : std::nullopt,
                         p.stride, p.padding, p.dilation, p.transposed, p.outputPadding, p.groups,
                         outputMask);
                     return {gi, gw, gb};
                   });
  }
  if (const uint32_t observers = activeOpObservers(); observers != 0) [[unlikely]] {
    // Note [Op observers]
    countFlops(observers, [&] {
      return FlopCounter::conv_backward_flop(gradOutput, input, weight, transposed, outputMask,
                                             gradInput, gradWeight);
    });
    logOpPath(observers, kBackward, /*async=*/true, device);
  }
  return {gradInput, gradWeight, gradBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolutionOverrideable);
  m.impl("convolution_backward_overrideable", convolutionBackwardOverrideable);
}

}  // namespace c10_npu::aten
