// Copies between npu and cpu and across npu devices, host reads of npu data,
// and Tensor.record_stream. See Note [Ops run on streams].
//
// Every copy runs as a task on the current stream of the npu device involved
// (the destination's for npu→npu). Blocking copies then synchronize that
// stream; non_blocking copies with pinned host memory return at once (the
// pinned block is kept from reuse until the copy ran), as on CUDA. A
// non_blocking copy with pageable host memory is performed synchronously.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <torch/library.h>

#include "aten/OpLauncher.h"
#include "aten/OpTask.h"
#include "core/ExternalStreams.h"
#include "core/HostSync.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"

namespace c10_npu::aten {
namespace {

bool isNpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

bool isPinned(const at::Tensor& cpu) { return NPUHostAllocator::isPinnedPtr(cpu.storage().data()); }

// Queues dst.copy_(src) on `stream`. Device tensors are captured like every
// op's (Note [Task captures and memory reuse]): memory of the copy's own
// stream as a CPU alias, which does not keep it alive (a dropped cast result
// goes back to the pool at once, as on CUDA), anything else held until the
// copy ran; host tensors are held. The captures are snapshots taken now, at
// enqueue (Note [Task captures are metadata snapshots]): a resize_ or set_ of
// `dst` on the host while the copy is queued must not change where and in
// which shape the copy writes. (Taken in the task, x.clone().resize_(n) had
// the clone's copy write the old shape into the new, larger storage, or fail
// on the new shape, and the resize's own copy of the old bytes then
// overwrote it.)
void launchCopy(const NPUStream& stream, const at::Tensor& dst, const at::Tensor& src) {
  TaskAccess access;
  if (isNpu(src)) access.read(src);
  if (isNpu(dst)) {
    access.write(dst);
  } else {
    access.writesHost = true;  // a poisoned source fails the copy (Note [Poisoned memory])
  }
  const auto capture = [&stream](const at::Tensor& t) {
    return isNpu(t) ? detail::captureForTask(t, stream) : t;
  };
  launchKernel(stream, "aten::copy_", std::move(access),
               [d = capture(dst), s = capture(src)]() mutable {
                 at::Tensor out = detail::kernelView(d);
                 out.copy_(detail::kernelView(s));
               });
}

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: both tensors must be defined",
              NPU_ERROR_SUFFIX);
  // Shapes are checked here, at the call, as CPU and CUDA do, not later in
  // the task (infer_size raises PyTorch's usual message).
  TORCH_CHECK(at::infer_size(dst.sizes(), self.sizes()) == dst.sizes(),
              "copy_: the source of shape ", self.sizes(),
              " cannot be broadcast to the destination of shape ", dst.sizes(), NPU_ERROR_SUFFIX);
  // The overlap checks CPU's and CUDA's copies make in their TensorIterator
  // (PyTorch's copy_ sends other devices here before building one): at the
  // call, not as a failure of the copy task later.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, self);
  if (dst.numel() == 0) return dst;
  if (isNpu(self) && isNpu(dst)) {
    const NPUStream dstStream = getCurrentNPUStream(dst.device().index());
    if (self.device() != dst.device()) {
      // Cross-device: the copy (on the destination's stream) must follow the
      // work that produced `self` on the source's current stream, and the
      // source's stream must not reuse self's memory before the copy read it.
      const NPUStream srcStream = getCurrentNPUStream(self.device().index());
      NPUEvent srcReady;
      srcReady.record(srcStream);
      srcReady.block(dstStream);
      launchCopy(dstStream, dst, self);
      NPUEvent copyDone;
      copyDone.record(dstStream);
      copyDone.block(srcStream);
    } else {
      launchCopy(dstStream, dst, self);
    }
    return dst;
  }
  const at::Tensor& npuSide = isNpu(dst) ? dst : self;
  const at::Tensor& cpuSide = isNpu(dst) ? self : dst;
  TORCH_CHECK(cpuSide.device().is_cpu(), "copy_: cannot copy between ", self.device(), " and ",
              dst.device(), NPU_ERROR_SUFFIX);
  const c10::DeviceGuard guard(npuSide.device());
  const NPUStream stream = getCurrentNPUStream(npuSide.device().index());
  const bool blocking = !(non_blocking && isPinned(cpuSide));
  // Note [Host syncs of the op path]: reported before anything is queued.
  if (blocking) noteHostSync(isNpu(dst) ? "aten::copy_ (cpu to npu)" : "aten::copy_ (npu to cpu)");
  launchCopy(stream, dst, self);
  if (!blocking) {
    NPUHostAllocator::recordEvent(cpuSide.storage().data(), stream);
    return dst;
  }
  // A blocking copy: the host may touch the CPU tensor once we return.
  waitForHostRead(stream);
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copyFrom(self, dst, /*non_blocking=*/false);
}

// item(), tolist(), printing and `if tensor:` all end here: wait for the
// current stream of the tensor's device, then read the memory.
at::Scalar localScalarDense(const at::Tensor& self) {
  noteHostSync("aten::_local_scalar_dense");
  const NPUStream stream = getCurrentNPUStream(self.device().index());
  waitForHostRead(stream);
  if (self.has_storage()) poison::raiseIfPoisoned(self.storage().unsafeGetStorageImpl(), "item()");
  return at::native::_local_scalar_dense_cpu(cpuAlias(self));
}

void recordStream(at::Tensor& self, c10::Stream s) {
  NPUStream stream(s);
  external::checkManagedOnly(stream, "Tensor.record_stream");
  NPUCachingAllocator::recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copyFrom);
  m.impl("_copy_from_and_resize", copyFromAndResize);
  m.impl("_local_scalar_dense", localScalarDense);
  m.impl("record_stream", recordStream);
}

// Note [Copies resolve conj and neg bits themselves]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// For a device that is not CPU or CUDA, copy_ calls _copy_from. A source with
// the conjugate (negative) bit would send _copy_from through the Conjugate
// (Negative) fallback, which materialises such inputs with clone(), which is
// empty_like + copy_ -> _copy_from again with the same source: an unbounded
// recursion that overflows the stack (torch.fft.ifft on real input, hfft,
// x.conj().cpu(), polar's backward). CPU's copy_ resolves the bits itself, so
// our copies let them through and run it over CPU aliases that keep them
// (Note [CPU aliases keep the conj and neg bits]), as CUDA's copy does.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace c10_npu::aten
