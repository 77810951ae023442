// The generic op path: every ATen op on npu tensors that has no dedicated
// kernel in this folder comes here (a boxed fallback for PrivateUse1) and
// runs asynchronously on the current stream. See Note [Ops run on streams].
//
// Per call, on the calling thread:
//  1. find the op's device (all npu tensors must share it);
//  2. infer output metadata by running the op on meta tensors
//     (OutputMetadata.h; the op's plan from its schema is in OpPlan.h);
//  3. build outputs: in-place/out= returns are the argument itself; view
//     returns are as_strided views of the viewed argument (no task at all);
//     other returns are fresh npu tensors from the caching allocator;
//  4. queue a task that runs the CPU kernel over the device memory — the
//     op's out= variant when it has one, so the kernel writes straight into
//     the outputs; otherwise the op itself, copying fresh results in
//     (OpTask.h).
// Ops whose outputs cannot be known without the data (no meta kernel,
// data-dependent shapes, non-tensor results) take the synchronous path
// (SynchronousOp.h): wait for the current stream, run the CPU kernel, copy
// results to the device.
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/AsyncFallback.h"
#include "aten/OpArgs.h"
#include "aten/OpLauncher.h"
#include "aten/OpObservers.h"
#include "aten/OpPlan.h"
#include "aten/OpTask.h"
#include "aten/OutputMetadata.h"
#include "aten/SynchronousOp.h"
#include "aten/WrappedNumbers.h"
#include "aten/flopcount/CountedProducts.h"
#include "aten/sparse/SparseOpPath.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"

namespace c10_npu::aten {
namespace {

using namespace detail;

// Ops that accept CPU index tensors beside npu tensors, as CUDA does.
bool acceptsCpuTensors(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put_" ||
         name.name == "aten::_index_put_impl_" || name.name == "aten::index_put";
}

struct DeviceFinder {
  const c10::OperatorHandle& op;
  c10::DeviceIndex device = -1;
  bool sawCpuTensor = false;

  void tensor(const at::Tensor& t) {
    if (!t.defined()) return;
    if (isNpu(t)) {
      const c10::DeviceIndex d = t.device().index();
      TORCH_CHECK(device == -1 || device == d,
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, npu:",
                  static_cast<int>(device), " and npu:", static_cast<int>(d),
                  "! (when checking arguments of ", op.schema().name(), ")", NPU_ERROR_SUFFIX);
      device = d;
    } else if (t.device().is_cpu() && t.dim() > 0) {
      sawCpuTensor = true;
    }
  }

  void value(const IValue& v) {
    if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) tensor(t);
    } else if (v.isList()) {
      for (const IValue& e : v.toListRef()) {
        if (e.isTensor()) tensor(e.toTensor());
      }
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1 &&
               device == -1) {
      device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
};

// Note [Views that change dtype or bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A view return is built from its meta twin: sizes, strides and offset as
// the meta kernel computed them over a meta base at offset 0, and the meta
// result's dtype and conj/neg bits. The dtype need not be the base's:
// view_as_real makes float views of complex memory, view_as_complex the
// reverse, view(dtype) either. Sizes, strides and offsets count elements of
// the view's dtype, so the view must be made with that dtype (an as_strided
// of the base would read [n, 2] float strides as complex, twice past the
// storage), and the base's own offset must be converted to view elements
// through bytes; a base offset that is not a whole number of view elements
// cannot be viewed (PyTorch raises the same for view_as_complex).
at::Tensor viewOf(const at::Tensor& base, const TensorMeta& m) {
  at::Tensor view;
  if (m.dtype == base.scalar_type()) {
    view = base.as_strided(m.sizes, m.strides, base.storage_offset() + m.offset);
  } else {
    const caffe2::TypeMeta dtype = c10::scalarTypeToTypeMeta(m.dtype);
    const int64_t baseBytes = base.storage_offset() * static_cast<int64_t>(base.itemsize());
    const auto itemsize = static_cast<int64_t>(dtype.itemsize());
    TORCH_CHECK(baseBytes % itemsize == 0, "cannot view a tensor of dtype ", base.scalar_type(),
                " at storage offset ", base.storage_offset(), " as ", m.dtype,
                ": the offset is not a multiple of ", itemsize, " bytes", NPU_ERROR_SUFFIX);
    const int64_t offset = baseBytes / itemsize + m.offset;
    at::native::checkInBoundsForStorage(c10::IntArrayRef(m.sizes), c10::IntArrayRef(m.strides),
                                        offset, dtype, base.storage());
    // The key set is the base's minus its bits, which are set from the meta
    // result below (view_as_real of a conj tensor is an error, not a view).
    c10::DispatchKeySet keys =
        base.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
    view = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW,
                                                    c10::Storage(base.storage()), keys, dtype);
    view.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, offset);
  }
  if (view.is_conj() != m.conj) view._set_conj(m.conj);
  if (view.is_neg() != m.neg) view._set_neg(m.neg);
  return view;
}

// A fresh output for each defined metadata; `fresh` collects them in return
// order (undefined ones keep their position; the task skips them).
IValue freshOutput(const ReturnInfo& ri, const std::vector<TensorMeta>& metas,
                   c10::DeviceIndex device, std::vector<at::Tensor>& fresh) {
  auto makeNew = [&](const TensorMeta& m) {
    if (!m.defined) {
      fresh.emplace_back();
      return at::Tensor();
    }
    at::Tensor t = emptyNpu(m.sizes, m.strides, m.dtype, device);
    fresh.push_back(t);
    return t;
  };
  if (!ri.isList) return makeNew(metas.at(0));
  c10::List<at::Tensor> out;
  for (const TensorMeta& m : metas) out.push_back(makeNew(m));
  return out;
}

IValue viewOutput(const ReturnInfo& ri, const std::vector<TensorMeta>& metas,
                  const at::Tensor& base) {
  if (!ri.isList) return viewOf(base, metas.at(0));
  c10::List<at::Tensor> out;
  for (const TensorMeta& m : metas) out.push_back(viewOf(base, m));
  return out;
}

// 3. The op's results: see the top of this file.
Stack makeOutputs(const Stack& args, const OpInfo& info, const MetaResult& metaResult,
                  c10::DeviceIndex device, std::vector<at::Tensor>& fresh) {
  Stack results;
  results.reserve(info.returns.size());
  for (size_t r = 0; r < info.returns.size(); ++r) {
    const ReturnInfo& ri = info.returns[r];
    const std::vector<TensorMeta>& metas = metaResult.returns[r];
    switch (ri.kind) {
      case ReturnKind::kMutatedArg: {
        const IValue& a = args[ri.arg];
        if (a.isTensor() && metas.size() == 1 && metas[0].defined) {
          // PyTorch's rule for every out= and in-place op, checked here, at
          // the call, as CPU does, rather than by the kernel later.
          TORCH_CHECK(c10::canCast(metas[0].dtype, a.toTensor().scalar_type()), "result type ",
                      metas[0].dtype, " can't be cast to the desired output type ",
                      a.toTensor().scalar_type());
        }
        if (a.isTensor() && metas.size() == 1 &&
            a.toTensor().sizes() != c10::IntArrayRef(metas[0].sizes)) {
          // out= with a wrong size: resize (and warn if it had elements)
          // exactly as PyTorch's kernels do.
          at::native::resize_output(a.toTensor(), metas[0].sizes);
        }
        results.push_back(a);
        break;
      }
      case ReturnKind::kViewOfArg:
        results.push_back(viewOutput(ri, metas, args[ri.arg].toTensor()));
        break;
      case ReturnKind::kNew:
        results.push_back(freshOutput(ri, metas, device, fresh));
        break;
      case ReturnKind::kNonTensor:
        TORCH_INTERNAL_ASSERT(false, "non-tensor return on the async path");
    }
  }
  return results;
}

// Op tasks live in npuTaskDataAlloc's recycled blocks (Note [Op tasks are
// recycled, not malloc'd] in OpLauncher.h); 1 KiB bounds the memory each
// queued op holds.
static_assert(sizeof(KernelTask<OpTask>) <= 1024 && sizeof(KernelTask<OutOpTask>) <= 1024,
              "an op task outgrew its pool block size class");

// The task's copy of the arguments, moved out of `args`.
TaskArgs taskArgs(Stack& args) {
  return TaskArgs(std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
}

// 4. Queues the op's task on the current stream. `args` are moved into it.
void launchOpTask(const c10::OperatorHandle& op, Stack args, const OpInfo& info,
                  std::vector<at::Tensor> fresh, c10::DeviceIndex device) {
  // Random ops reserve their numbers now, at enqueue.
  const std::optional<SeedReservation> seed = reserveOpSeed(args, info, device);
  const NPUStream stream = getCurrentNPUStream(device);
  TaskAccess access = opAccess(args, info, fresh);
  const char* name = op.schema().name().c_str();
  // See Note [Replayed op tasks build their arguments once]; an eager task
  // takes what it can by value (Note [Aliases are made where the kernel runs]).
  const bool recorded = graphs::anyCapture() && graphs::recorderOf(stream) != nullptr;
  const size_t computeArgs =
      info.functionalVariant.has_value() ? args.size() - info.numOutArgs : args.size();
  DeferredArgs deferred;
  const std::optional<c10::ScalarType> promoteTo =
      recorded ? std::nullopt : pointwisePromotionDtype(op, args);
  // See Note [Task captures and memory reuse].
  auto capture = [&stream](const at::Tensor& t) { return captureForTask(t, stream); };
  ReleaseOn releaseOn = ReleaseOn::kAnyThread;
  for (size_t i = 0; i < args.size(); ++i) {
    IValue& a = args[i];
    if (!recorded && i < computeArgs &&
        deferred.take(args, i,
                      a.isTensor() && isNpu(a.toTensor()) && mayAlias(a.toTensor(), stream),
                      promoteTo)) {
      continue;
    }
    a = mapTensors(a, capture, std::nullopt);
    if (!releasableAnywhere(a)) releaseOn = ReleaseOn::kHostThread;
  }
  if (info.functionalVariant.has_value()) {
    // See Note [out= ops run functionally]. Its outputs are out= arguments.
    std::unique_ptr<const ReplayArgs> replay;
    if (recorded) replay = std::make_unique<const ReplayArgs>(op, args, computeArgs);
    launchKernel(stream, name, std::move(access),
                 OutOpTask{op, *info.functionalVariant, taskArgs(args), computeArgs,
                           info.generatorArg, seed, &info, std::move(replay), std::move(deferred)},
                 releaseOn);
    return;
  }
  // Fresh outputs were just allocated on `stream` (emptyNpu): no need to ask
  // the allocator whether they may be aliased.
  const bool freshTaken = !recorded && deferred.takeOutputs(fresh);
  if (!freshTaken) {
    for (at::Tensor& f : fresh) {
      if (f.defined()) f = cpuAlias(f);
    }
  }
  bool allDefined = true;
  for (const at::Tensor& f : fresh) allDefined &= f.defined();
  std::optional<c10::OperatorHandle> outOp;
  if (allDefined && !info.outVariantBroken.load(std::memory_order_relaxed)) {
    outOp = info.outVariant;
  }
  std::unique_ptr<const ReplayArgs> replay;
  if (recorded) replay = std::make_unique<const ReplayArgs>(op, args, args.size());
  launchKernel(
      stream, name, std::move(access),
      OpTask{op, taskArgs(args), freshTaken ? std::vector<at::Tensor>() : std::move(fresh), outOp,
             info.generatorArg, seed, &info, std::move(replay), std::move(deferred)},
      releaseOn);
}

// The asynchronous path. Returns false (stack untouched) if the op must run
// synchronously.
bool tryRunAsync(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex device,
                 const OpInfo& info) {
  if (info.anyNonTensor || info.metaUntrusted.load(std::memory_order_relaxed)) return false;
  const size_t nargs = op.schema().arguments().size();
  Stack args(stack->end() - nargs, stack->end());
  if (writesOverlappingMemory(args, info)) return false;

  // 2. Output metadata. See Note [Output metadata cache].
  const std::shared_ptr<const MetaResult> metaResult = outputMetadata(op, args, info);
  if (!metaResult) return false;

  std::vector<at::Tensor> fresh;  // kNew outputs, in return order (lists flattened)
  Stack results = makeOutputs(args, info, *metaResult, device, fresh);

  // Pure views need no work on the device.
  bool onlyViews = !info.returns.empty();
  for (const auto& ri : info.returns) onlyViews &= ri.kind == ReturnKind::kViewOfArg;
  if (!onlyViews) launchOpTask(op, std::move(args), info, std::move(fresh), device);
  replaceArgsWithResults(stack, nargs, results);
  return true;
}

// Runs the op on its device; returns whether it took the asynchronous path,
// and the device in `device`.
bool runOnOpPath(const c10::OperatorHandle& op, Stack* stack, c10::DeviceIndex& device) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  DeviceFinder finder{op};
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) finder.value((*stack)[i]);
  TORCH_CHECK(finder.device >= 0, "npu fallback for ", schema.name(),
              " found no npu tensor or device among the arguments", NPU_ERROR_SUFFIX);
  TORCH_CHECK(!finder.sawCpuTensor || acceptsCpuTensors(schema.operator_name()),
              "Expected all tensors to be on the same device, but found at least two devices, "
              "npu:",
              static_cast<int>(finder.device), " and cpu! (when checking arguments of ",
              schema.name(), ")", NPU_ERROR_SUFFIX);
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, finder.device));
  const OpInfo& info = opInfo(op);
  // Note [Ops without a CPU kernel] in OpPlan.cpp.
  TORCH_CHECK_NOT_IMPLEMENTED(!info.noCpuKernel, "'", schema.name(),
                              "' is not supported on npu: the simulated NPU runs every operator "
                              "through its CPU kernel, and this one has none (it is specific to "
                              "another backend).",
                              NPU_ERROR_SUFFIX);
  device = finder.device;
  if (finder.sawCpuTensor || !tryRunAsync(op, stack, finder.device, info)) {
    runSynchronously(op, stack, finder.device, info);
    return false;
  }
  return true;
}

// The op path with its observers (Note [Op observers]): counted and logged
// after it ran, so that an op that raised is neither.
void runObserved(const c10::OperatorHandle& op, Stack* stack, uint32_t observers) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<CountedProduct> product;
  if ((observers & kFlopCount) != 0) {
    product = countedProduct(op, torch::jit::last(*stack, op.schema().arguments().size()));
  }
  c10::DeviceIndex device = -1;
  const bool async = runOnOpPath(op, stack, device);
  if (product.has_value()) countFlops(observers, [&] { return product->flops(); });
  const char* name = op.schema().name().c_str();
  logOpPath(observers, name, async, device);
  logOpTime(
      observers, name,
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

void npuFallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, Stack* stack) {
  // One relaxed load and a branch when nothing observes (Note [Op observers]).
  if (const uint32_t observers = activeOpObservers(); observers != 0) [[unlikely]] {
    runObserved(op, stack, observers);
    return;
  }
  c10::DeviceIndex device = -1;
  (void)runOnOpPath(op, stack, device);
}

}  // namespace

void detail::runGenericOp(const c10::OperatorHandle& op, Stack* stack) {
  npuFallback(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

// Note [Structured ops take the op path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch gives every structured op's functional and in-place variants a
// kernel for the CompositeExplicitAutogradNonFunctional key, which serves
// every backend without a kernel of its own, ahead of the backend fallback.
// On npu it ran the op's meta function over the npu tensors (a
// TensorIterator build, at every call), allocated the output and called the
// out= op, which reached the fallback and computed the same metadata again
// (from the cache). For `x + 1` that was a third of the op's host time. So
// the fallback is registered as the npu kernel of those ops: it takes their
// metadata from the cache (Note [Output metadata cache]), allocates the
// output and runs the same out= kernel on the device, as the composite would
// have done through the fallback, minus the uncached meta function and the
// second dispatch. Only ops of an out= family are routed (the others under
// that key include metadata ops such as transpose_, which the op path would
// take for data ops); ops with an npu kernel of their own keep it.
void detail::routeCompositeOpsToOpPath() {
  static const bool routed = [] {
    // Leaked: the registrations must outlive every op call, up to exit.
    auto* lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                 c10::DispatchKey::PrivateUse1, __FILE__, __LINE__)
                    .release();
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const c10::OperatorName& name : dispatcher.getAllOpNamesForDispatchKey(
             c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
      const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
      if (!op.has_value() || name.name.rfind("aten::", 0) != 0 ||
          op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
          !hasOutVariantFamily(op->schema())) {
        continue;
      }
      lib->impl(qualifiedName(name).c_str(),
                torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
    }
    return true;
  }();
  (void)routed;
  sparse::routeCompositeOpsToSparsePath();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
}

}  // namespace c10_npu::aten
