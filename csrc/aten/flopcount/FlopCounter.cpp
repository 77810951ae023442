#include "aten/flopcount/FlopCounter.h"

#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>

#include <vector>

namespace c10_npu::aten {
namespace {

using Shape = std::vector<int64_t>;

int64_t product(c10::IntArrayRef sizes) {
  int64_t p = 1;
  for (const int64_t s : sizes) p *= s;
  return p;
}

// PyTorch's conv_flop_count. torch_npu's C++ multiplies the whole output
// shape for a transposed convolution, against its own comment (and
// PyTorch): the comment's formula is the one used here (docs/COMPATIBILITY.md).
int64_t convFlopCount(const Shape& x, const Shape& w, const Shape& out, bool transposed) {
  const Shape& spatialOf = transposed ? x : out;
  const c10::IntArrayRef spatial = c10::IntArrayRef(spatialOf).slice(2);
  return x.at(0) * product(w) * product(spatial) * 2;
}

// Swaps the batch and channel dimensions: grad_weight as a convolution.
Shape swapped(Shape shape) {
  TORCH_INTERNAL_ASSERT(shape.size() >= 2, "a convolution operand has at least 2 dimensions");
  std::swap(shape[0], shape[1]);
  return shape;
}

Shape shapeOf(const at::Tensor& t) { return t.sizes().vec(); }

}  // namespace

int64_t FlopCounter::mm_flop(const at::Tensor& self, const at::Tensor& mat2) {
  const int64_t dim1 = self.dim();
  const int64_t dim2 = mat2.dim();
  TORCH_CHECK(dim1 > 0 && dim2 > 0, "matmul got error dimensions: (", dim1, ", ", dim2, ")");
  const c10::IntArrayRef batch1 = self.sizes().slice(0, dim1 > 2 ? dim1 - 2 : 0);
  const c10::IntArrayRef batch2 = mat2.sizes().slice(0, dim2 > 2 ? dim2 - 2 : 0);
  int64_t flop = 2 * self.size(-1) * product(at::infer_size(batch1, batch2));
  if (dim1 >= 2) flop *= self.size(-2);
  if (dim2 >= 2) flop *= mat2.size(-1);
  return flop;
}

int64_t FlopCounter::addmm_flop(const at::Tensor& mat1, const at::Tensor& mat2) {
  return mm_flop(mat1, mat2);
}

int64_t FlopCounter::bmm_flop(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 3 && mat2.dim() == 3 && self.size(0) == mat2.size(0) &&
                  self.size(2) == mat2.size(1),
              "The tensor dimension is incorrect: bmm of ", self.sizes(), " and ", mat2.sizes());
  return self.size(0) * self.size(1) * mat2.size(2) * 2 * self.size(2);
}

int64_t FlopCounter::baddbmm_flop(const at::Tensor& batch1, const at::Tensor& batch2) {
  return bmm_flop(batch1, batch2);
}

int64_t FlopCounter::conv_flop(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                               const at::Tensor& output) {
  return convFlopCount(shapeOf(input), shapeOf(weight), shapeOf(output), transposed);
}

int64_t FlopCounter::conv_backward_flop(const at::Tensor& grad_output, const at::Tensor& input,
                                        const at::Tensor& weight, bool transposed,
                                        std::array<bool, 3> output_mask,
                                        const at::Tensor& grad_input,
                                        const at::Tensor& grad_weight) {
  const Shape gradOut = shapeOf(grad_output);
  int64_t flop = 0;
  if (output_mask[0]) {
    // grad_input is the transposed convolution of grad_output by the weight.
    flop += convFlopCount(gradOut, shapeOf(weight), shapeOf(grad_input), !transposed);
  }
  if (output_mask[1]) {
    const Shape gradWeight = swapped(shapeOf(grad_weight));
    flop += transposed ? convFlopCount(swapped(gradOut), swapped(shapeOf(input)), gradWeight, false)
                       : convFlopCount(swapped(shapeOf(input)), swapped(gradOut), gradWeight, false);
  }
  return flop;
}

}  // namespace c10_npu::aten
