#include "aten/flopcount/CountedProducts.h"

#include <string_view>

#include "aten/flopcount/FlopCounter.h"

namespace c10_npu::aten {

std::optional<CountedProduct> countedProduct(const c10::OperatorHandle& op,
                                             c10::ArrayRef<c10::IValue> args) {
  // Every overload of these names has its two factors at these positions:
  // mm(self, mat2), addmm(self, mat1, mat2), bmm(self, mat2),
  // baddbmm(self, batch1, batch2), and the same for _ and .out.
  struct Counted {
    std::string_view name;
    size_t first;
    int64_t (*formula)(const at::Tensor&, const at::Tensor&);
  };
  static constexpr Counted kCounted[] = {
      {"aten::mm", 0, &FlopCounter::mm_flop},
      {"aten::addmm", 1, &FlopCounter::addmm_flop},
      {"aten::addmm_", 1, &FlopCounter::addmm_flop},
      {"aten::bmm", 0, &FlopCounter::bmm_flop},
      {"aten::baddbmm", 1, &FlopCounter::baddbmm_flop},
      {"aten::baddbmm_", 1, &FlopCounter::baddbmm_flop},
  };
  const std::string& name = op.operator_name().name;
  for (const Counted& c : kCounted) {
    if (name != c.name) continue;
    if (args.size() < c.first + 2 || !args[c.first].isTensor() || !args[c.first + 1].isTensor()) {
      return std::nullopt;
    }
    return CountedProduct{c.formula, args[c.first].toTensor(), args[c.first + 1].toTensor()};
  }
  return std::nullopt;
}

}  // namespace c10_npu::aten
