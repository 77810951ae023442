// Factories, views and metadata ops of npu tensors. None of these touch
// tensor data, so none of them is queued: they run on the calling thread.
// (Data-moving resizes queue their copy.) See Note [Ops run on streams].
#include <ATen/EmptyTensor.h>
#include <ATen/Context.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "aten/OpLauncher.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUStorageImpl.h"
#include "core/NPUStream.h"
#include "core/NPUSwappedMemoryAllocator.h"

namespace c10_npu {
extern void (*gResizeStorageBytes)(const c10::Storage&, size_t);
}

namespace c10_npu::aten {
namespace {

constexpr c10::DispatchKeySet kNpuKeys(c10::DispatchKey::PrivateUse1);

void checkFactoryOptions(std::optional<c10::Device> device, std::optional<c10::Layout> layout,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!device.has_value() || device->type() == c10::DeviceType::PrivateUse1,
              "Expected a npu device, but got: ", *device, NPU_ERROR_SUFFIX);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "npu tensors support only the strided layout, but got ", *layout, NPU_ERROR_SUFFIX);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "Only CPU tensors can be pinned; an npu tensor cannot use pin_memory=True",
              NPU_ERROR_SUFFIX);
}

// Note [npu tensors are made with NPUStorageImpl]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The factories below do what at::detail::empty_generic and
// empty_strided_generic do (same checks, same metadata), except that the
// storage is an NPUStorageImpl (Note [Storages are freed on any thread] in
// core/NPUStorageImpl.h): ATen's versions construct a c10::StorageImpl
// directly, without asking c10's per-device storage factory.

// ATen's empty functions warn likewise, once per process.
void warnIfComplexHalf(c10::ScalarType dtype) {
  if (dtype == c10::kComplexHalf) {
    TORCH_WARN_ONCE("complex32 (ComplexHalf) tensors are experimental in PyTorch: many operators ",
                    "do not support them yet.");
  }
}

at::Tensor tensorOver(size_t nbytes, c10::ScalarType dtype,
                      c10::Allocator* allocator = NPUCachingAllocator::get()) {
  return at::detail::make_tensor_base<c10::TensorImpl>(
      c10::Storage(makeNPUStorage(nbytes, allocator)), kNpuKeys, c10::scalarTypeToTypeMeta(dtype));
}

at::Tensor emptyContiguousNpu(c10::IntArrayRef size, c10::ScalarType dtype,
                              std::optional<c10::MemoryFormat> memory_format,
                              c10::Allocator* allocator = NPUCachingAllocator::get()) {
  at::detail::check_size_nonnegative(size);
  warnIfComplexHalf(dtype);
  at::Tensor t = tensorOver(
      at::detail::computeStorageNbytesContiguous(size, c10::elementSize(dtype)), dtype, allocator);
  // A new TensorImpl has sizes [0] already.
  if (size.size() != 1 || size[0] != 0) t.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Contiguous) {
    t.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return t;
}

at::Tensor emptyStridedNpu(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype) {
  at::detail::check_size_nonnegative(size);
  warnIfComplexHalf(dtype);
  at::Tensor t =
      tensorOver(at::detail::computeStorageNbytes(size, stride, c10::elementSize(dtype)), dtype);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return t;
}

// Note [Deterministic fill of uninitialized memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With torch.use_deterministic_algorithms(True) and
// torch.utils.deterministic.fill_uninitialized_memory (its default), CPU and
// CUDA fill the memory of empty tensors, and the part of a storage that
// resize_ adds, with NaN (floating and complex types) or the type's largest
// value, so that reading it by mistake gives the same result every run. The
// npu factories and resize_ do the same with PyTorch's fill (queued like any
// fill_). Off by default: then two flag reads per call.
bool fillUninitialized() {
  const auto& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

at::Tensor filledIfDeterministic(at::Tensor t) {
  if (C10_UNLIKELY(fillUninitialized())) at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor emptyMemoryFormat(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                             std::optional<bool> pin_memory,
                             std::optional<c10::MemoryFormat> memory_format) {
  checkFactoryOptions(device, layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return filledIfDeterministic(emptyContiguousNpu(size, c10::dtype_or_default(dtype), memory_format));
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  checkFactoryOptions(device, layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return filledIfDeterministic(emptyStridedNpu(size, stride, c10::dtype_or_default(dtype)));
}

// Replaces a storage's memory by `nbytes` of fresh memory (none for 0) that
// holds the first min(old, new) bytes. The copy of the kept bytes is queued on
// the current stream, so it is ordered after every write already queued
// there; the old memory lives until that copy ran (with nothing to copy it is
// freed at once, stream-ordered like any free: Note [Task captures and memory
// reuse]). The storage changes only once the copy is queued: if anything
// raises before, the storage (and its tensors) are as they were.
void reallocateStorage(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable",
              NPU_ERROR_SUFFIX);
  const c10::DeviceIndex device = storage.device().index();
  c10::DataPtr fresh = nbytes > 0 ? NPUCachingAllocator::allocate(nbytes, device)
                                  : c10::DataPtr(nullptr, storage.device());
  auto& mutableStorage = const_cast<c10::Storage&>(storage);
  const size_t keptBytes = std::min(storage.nbytes(), nbytes);
  if (keptBytes > 0 && storage.data() != nullptr) {
    // The task reads the old bytes through `src`; `old` takes the old
    // DataPtr once the launch succeeded, and keeps it until the task ran.
    auto old = std::make_shared<c10::DataPtr>();
    const void* src = storage.data();
    void* dst = fresh.get();
    TaskAccess access;
    access.reads.push_back(storage.getWeakStorageImpl());
    access.writes.push_back(TaskAccess::Write{storage.getWeakStorageImpl(), false});
    launchKernel(getCurrentNPUStream(device), "aten::resize_", std::move(access),
                 [old, src, dst, keptBytes] { std::memcpy(dst, src, keptBytes); });
    *old = mutableStorage.set_data_ptr(std::move(fresh));
  } else {
    mutableStorage.set_data_ptr_noswap(std::move(fresh));
  }
  mutableStorage.set_nbytes(nbytes);
}

// Tensor.resize_: a tensor's storage grows to at least `nbytes` and never
// shrinks (as on CPU and CUDA).
void growStorage(const c10::Storage& storage, size_t nbytes) {
  if (nbytes > storage.nbytes()) reallocateStorage(storage, nbytes);
}

// UntypedStorage.resize_: exactly `nbytes`, shrinking too; 0 frees the memory
// (FSDP frees its parameters' memory this way), as CUDA's resize_bytes does.
void resizeStorageBytes(const c10::Storage& storage, size_t nbytes) {
  if (nbytes != storage.nbytes()) reallocateStorage(storage, nbytes);
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  at::native::check_size_nonnegative(sizes);
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t numel = c10::multiply_integers(sizes);
  const size_t oldNbytes = impl->unsafe_storage().nbytes();
  if (numel > 0) {
    // Storage first: if it cannot grow, the tensor keeps its old shape.
    const size_t needed = (static_cast<size_t>(impl->storage_offset()) + numel) * self.itemsize();
    growStorage(impl->unsafe_storage(), needed);
  }
  impl->set_sizes_contiguous(sizes);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  // Note [Deterministic fill of uninitialized memory].
  if (C10_UNLIKELY(fillUninitialized())) {
    at::native::fill_resize_deterministic_(self, static_cast<int64_t>(oldNbytes));
  }
  return self;
}

at::Tensor asStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> storage_offset) {
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
      storage_offset.has_value() ? std::optional<int64_t>(storage_offset->expect_int())
                                 : std::nullopt);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& setSourceTensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& setSourceStorage(at::Tensor& self, at::Storage source) {
  return at::native::set_(self, source);
}

at::Tensor& setSourceStorageOffset(at::Tensor& self, at::Storage storage, int64_t offset,
                                   c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::cpu::set_(self, storage, offset, size, stride);
}

// Note [Shallow copies between cpu and npu]
// `x.data = y` (Variable::set_data) requires `_has_compatible_shallow_copy_type`;
// c10's default (TensorImpl::has_compatible_shallow_copy_type) knows only the
// built-in dense backends, so `x.data = x.data.npu()` on a cpu parameter, a
// torch_npu idiom, would fail with "incompatible tensor type". Both tensors
// are plain strided TensorImpls, so a shallow copy between them is sound;
// other layouts keep c10's rule. The op dispatches on the higher key of its
// two arguments, so this kernel sees cpu<->npu pairs.
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto plainDense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  if (plainDense(self) && plainDense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

struct RegisterResizeHook {
  RegisterResizeHook() { gResizeStorageBytes = &resizeStorageBytes; }
} registerResizeHook;

// torch_npu's empty_with_swapped_memory: an uninitialised contiguous npu
// tensor in host memory mapped into the device (Note [Swapped memory] in
// core/NPUSwappedMemoryAllocator.h).
at::Tensor emptyWithSwappedMemory(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                  std::optional<c10::Device> device) {
  checkFactoryOptions(device, std::nullopt, std::nullopt);
  c10::OptionalDeviceGuard guard;
  if (device.has_value() && device->has_index()) {
    guard.reset_device(
        c10::Device(c10::DeviceType::PrivateUse1, checkedDeviceIndex(device->index())));
  }
  return filledIfDeterministic(emptyContiguousNpu(size, c10::dtype_or_default(dtype), std::nullopt,
                                                  NPUSwappedMemoryAllocator::get()));
}

}  // namespace

at::Tensor emptyNpu(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype,
                    c10::DeviceIndex device) {
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  return emptyStridedNpu(sizes, strides, dtype);
}

TORCH_LIBRARY_FRAGMENT(npu, m) {
  m.def(
      "empty_with_swapped_memory(int[] size, *, ScalarType? dtype=None, Device? device=None) "
      "-> Tensor");
}

TORCH_LIBRARY_IMPL(npu, CompositeExplicitAutograd, m) {
  m.impl("empty_with_swapped_memory", &emptyWithSwappedMemory);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", emptyMemoryFormat);
  m.impl("empty_strided", emptyStrided);
  m.impl("as_strided", asStrided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshapeAlias);
  m.impl("resize_", resize);
  m.impl("set_.source_Tensor", setSourceTensor);
  m.impl("set_.source_Storage", setSourceStorage);
  m.impl("set_.source_Storage_storage_offset", setSourceStorageOffset);
  m.impl("_has_compatible_shallow_copy_type", hasCompatibleShallowCopyType);
}

}  // namespace c10_npu::aten
