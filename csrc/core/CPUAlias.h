// c10_npu::cpuAlias — the CPU view of an npu tensor's device memory.
//
// Layer: framework core. Device memory is host memory in the simulator, so a
// CPU tensor over the same bytes is how host code (the op layer's tasks, the
// distributed backend's transport) reads and writes it.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10_npu {

// A CPU tensor over the same memory, sizes and strides as `npu` (an npu
// tensor), with the same conj and neg bits. Only for use inside tasks (or
// after the stream was synchronized). Raises if `npu` reaches past its
// storage. Thread-safe.
//
// Note [CPU aliases keep the conj and neg bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// x.conj() and x._neg_view() are lazy: the bit says "read me conjugated /
// negated", the bytes are x's. Kernels that the Conjugate and Negative
// fallbacks let through (copy_, mm, add, ...) reach npu with the bit set and
// resolve it themselves on CPU, so the alias they run on must carry the bit;
// an alias without it silently reads the unconjugated values.
//
// Note [A CPU alias stays inside its storage]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A CPU kernel trusts sizes, strides and offset and writes wherever they
// point; the alias's storage is device memory shared with other tensors. So
// the alias is only made for metadata that lies inside the storage: a
// mismatch between an op's output metadata and its memory (a bug of ours,
// e.g. a view built with the wrong itemsize) fails the op with an error
// instead of corrupting another tensor's memory. The check is a few
// multiplications per dimension. Kernels cannot grow an alias either: its
// storage is not resizable and ends where the tensor ends (not where the
// device storage does), so an out kernel that resizes its output past it
// raises instead of writing over the neighbours of a view.
at::Tensor cpuAlias(const at::Tensor& npu);

// Note [Aliases of one storage share one storage]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU kernels find out whether their arguments overlap by comparing storages
// (at::get_overlap_status): views of one storage that overlap partly make
// them raise "some elements of the input tensor and the written-to tensor
// refer to a single memory location", and an argument that is the output is
// read before it is written. cpuAlias gives each alias a storage of its own,
// so a kernel given `x[1:]` and `x[:-1]` would see no overlap and compute a
// wrong result. Where that matters (the synchronous path, which runs every op
// that writes through overlapping arguments: Note [Writes through
// overlapping tensors run synchronously]), the aliases of one kernel call
// come from SharedStorageAliases: one CPU storage per npu storage, reaching
// as far as the furthest of its views among the arguments.
class SharedStorageAliases {
 public:
  // Notes the extent of `npu` (an npu tensor); call for every tensor before
  // the first alias(). Raises as cpuAlias does. Not thread-safe.
  void note(const at::Tensor& npu);
  // The alias of `npu`, on the storage shared with the other noted tensors
  // of its npu storage; cpuAlias for a tensor without memory. Not
  // thread-safe.
  at::Tensor alias(const at::Tensor& npu);

 private:
  struct Shared {
    const c10::StorageImpl* npu = nullptr;
    size_t extent = 0;
    c10::Storage cpu;  // made at the first alias()
  };
  std::vector<Shared> storages_;  // few: one per distinct npu storage
};

// What cpuAlias needs to make the alias later, taken by value: the memory,
// sizes, strides, offset, dtype and bits of an npu tensor at the time of the
// snapshot. Made on one thread, turned into an alias on another. Trivially
// copyable (a task moves it by memcpy), hence a bounded number of
// dimensions. See Note [Aliases are made where the kernel runs] in
// csrc/aten/DeferredArgs.h.
class AliasSnapshot {
 public:
  static constexpr size_t kMaxDims = 4;

  // Whether `npu` can be snapshotted: it has memory and at most kMaxDims
  // dimensions. Thread-safe.
  static bool possible(const at::Tensor& npu) noexcept;

  // The snapshot of an npu tensor for which possible() holds. Raises as
  // cpuAlias does if the tensor reaches past its storage. Thread-safe.
  explicit AliasSnapshot(const at::Tensor& npu);

  // An unset snapshot, only to be assigned (arrays of snapshots).
  AliasSnapshot() = default;

  // The CPU alias, as cpuAlias(npu) made at the snapshot would be. Only
  // inside tasks. Thread-safe (const).
  at::Tensor alias() const;

 private:
  void* data_;
  size_t extent_;  // bytes from data_ the tensor reaches
  int64_t offset_;
  int64_t sizes_[kMaxDims];
  int64_t strides_[kMaxDims];
  caffe2::TypeMeta dtype_;
  uint8_t dim_;
  bool conj_;
  bool neg_;
};

}  // namespace c10_npu
