// The FLOPs of the ops torch_npu counts, by torch_npu's formulas
// (torch_npu/csrc/flopcount/FlopCounter.cpp), which are PyTorch's
// (torch/utils/flop_counter.py): a multiply-add is 2 FLOPs, bias and
// accumulation terms are not counted. Layer: ops. Pure functions of the
// shapes; thread-safe.
//
// Counted where the op runs on npu (Note [Op observers] in OpObservers.h):
// mm, addmm, bmm, baddbmm (functional, in-place and out=), and the
// convolution forward and backward kernels; matmul, linear and attention's
// math path reach these through their decompositions, as on torch_npu with
// PyTorch's CPU-style kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>

namespace c10_npu::aten {

class FlopCounter {
 public:
  // A(..., m, k) @ B(..., k, n): 2 * k * (broadcast batch) * m * n.
  static int64_t mm_flop(const at::Tensor& self, const at::Tensor& mat2);
  // The product of addmm(input, mat1, mat2): the addition is not counted.
  static int64_t addmm_flop(const at::Tensor& mat1, const at::Tensor& mat2);
  // bmm(self [b, m, k], mat2 [b, k, n]): 2 * b * m * n * k.
  static int64_t bmm_flop(const at::Tensor& self, const at::Tensor& mat2);
  static int64_t baddbmm_flop(const at::Tensor& batch1, const at::Tensor& batch2);
  // A convolution: 2 * batch * prod(weight) * prod(spatial sizes), the
  // spatial sizes being the output's, or the input's when transposed.
  static int64_t conv_flop(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                           const at::Tensor& output);
  // Its backward: the grad_input and grad_weight products that `output_mask`
  // asks for (grad_bias is a sum, not counted).
  static int64_t conv_backward_flop(const at::Tensor& grad_output, const at::Tensor& input,
                                    const at::Tensor& weight, bool transposed,
                                    std::array<bool, 3> output_mask, const at::Tensor& grad_input,
                                    const at::Tensor& grad_weight);
};

}  // namespace c10_npu::aten
