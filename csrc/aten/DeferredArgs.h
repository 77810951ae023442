// Arguments of an eager op task that the task turns into kernel arguments on
// the executor that runs it. Internal to csrc/aten; used by the op tasks
// (OpTask.h) and the generic op path (AsyncFallback.cpp).
//
// Note [Aliases are made where the kernel runs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task's captures are made on the host thread and destroyed on the
// executor that ran it (Note [Tasks that hold only aliases are released where
// they ran] in OpLauncher.h). With glibc's allocator, memory allocated on one
// thread and freed on another never returns to the allocating thread's cache:
// every such allocation takes the arena's locked slow path on the host and
// every such free the same on the executor, and the two threads contend for
// the arena's lock and its cache lines. For `x + 1` on 16 floats that was
// about ten allocations per op (two CPU aliases of two objects each, the
// wrapped Python number's three, the task's vectors), and it made a tiny op
// cost twice CPU eager's; preloading jemalloc, which returns such memory to
// the allocating thread, took it to 1.1-1.4x (docs/PERFORMANCE.md).
// So an eager task takes the simple arguments by value instead:
//  - an npu tensor it may alias (Note [Task captures and memory reuse] in
//    OpTask.cpp) as an AliasSnapshot, from which the executor makes the CPU
//    alias it would have been handed (core/CPUAlias.h);
//  - a wrapped Python number (a 0-dim CPU tensor the binding made from `1`
//    in `x + 1`) as its value and dtype, from which the executor makes the
//    same wrapped number again; the host frees the binding's tensor itself.
// The stack the task keeps holds None in their places. The aliases and
// numbers are then made and freed on the executor, in its own cache. The
// snapshot is taken at enqueue, so Note [Task captures are metadata
// snapshots] holds as before. Tasks recorded into a graph keep their aliases
// (Note [Replayed op tasks build their arguments once] in ReplayArgs.h);
// tensors in lists, tensors held by reference and every other value are
// captured as before.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "aten/OpArgs.h"
#include "core/CPUAlias.h"

namespace c10_npu::aten::detail {

class DeferredArgs {
 public:
  // Bounded so that a task holding them stays within a 1 KiB block (the
  // size check in AsyncFallback.cpp): the memory a queued op holds.
  static constexpr size_t kMaxArgs = 3;
  static constexpr size_t kMaxOutputs = 2;

  // Takes stack[index] by value if it is a top-level argument this class
  // can make on the executor (an npu tensor with memory, to be aliased, or a
  // wrapped number) and there is room, leaving None in its place; returns
  // whether it did. `aliasable` says whether an npu tensor there may be
  // aliased (Note [Task captures and memory reuse] in OpTask.cpp);
  // `promoteTo` is the op's pointwisePromotionDtype (Note [Wrapped numbers
  // of pointwise ops] in WrappedNumbers.h). Not thread-safe (one builder).
  bool take(Stack& stack, size_t index, bool aliasable, std::optional<c10::ScalarType> promoteTo);

  // Takes snapshots of an op's fresh outputs (undefined ones included),
  // all or none: none if one has no memory or there are more than
  // kMaxOutputs. Returns whether it did. Not thread-safe (one builder).
  bool takeOutputs(const std::vector<at::Tensor>& fresh);

  // Puts the kernel's view of every argument taken into `kernelArgs` (the
  // kernel's stack, built from the task's stack with cpuArgs), at its index;
  // wrapped numbers converted to the op's dtype if `promote`. Thread-safe
  // (const); only inside tasks.
  void fill(Stack& kernelArgs, bool promote) const;

  // Whether fill converts a wrapped number when asked to. Thread-safe.
  bool promotes() const noexcept { return promotes_; }

  // Whether takeOutputs took the outputs. Thread-safe.
  bool hasOutputs() const noexcept { return outputCount_ > 0; }

  // The CPU aliases of the outputs taken, in order (undefined ones
  // undefined). Thread-safe (const); only inside tasks.
  std::vector<at::Tensor> outputs() const;

 private:
  // A wrapped number's value: `real` and `imag` for Double and
  // ComplexDouble, `integral` for Long and Bool.
  struct WrappedNumber {
    c10::ScalarType type;
    c10::ScalarType promotedType;  // Undefined: not converted
    double real;
    double imag;
    int64_t integral;
  };
  // Trivially destructible; take() constructs the member it sets.
  struct Entry {
    Entry() : number{} {}
    uint32_t index = 0;
    bool isAlias = false;  // which member of the union is set
    union {
      AliasSnapshot alias;
      WrappedNumber number;
    };
  };

  static bool readWrappedNumber(const at::Tensor& t, WrappedNumber& number);
  static at::Tensor makeWrappedNumber(const WrappedNumber& number, bool promote);
  // Plain values, so that moving the task is a copy of bytes; the arrays
  // are filled up to their counts only.
  // NOLINTBEGIN(cppcoreguidelines-pro-type-member-init)
  std::array<Entry, kMaxArgs> entries_;
  std::array<std::optional<AliasSnapshot>, kMaxOutputs> outputs_;
  // NOLINTEND(cppcoreguidelines-pro-type-member-init)
  uint8_t count_ = 0;
  uint8_t outputCount_ = 0;
  bool promotes_ = false;
};

}  // namespace c10_npu::aten::detail
