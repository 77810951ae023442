// Kernels for ops that have no CPU kernel for the generic op path to run:
// their computation is composed of CPU ATen ops and queued as one task.
// Used by Convolution.cpp, RNNCells.cpp and SyncBatchNorm.cpp.
//
// Layer: ops (csrc/aten).
//
// Note [Kernels composed of CPU ops]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch sends some work of devices it does not know to ops that only have
// kernels for the devices it does know: convolutions go to
// convolution_overrideable (whose default kernel raises), LSTM and GRU cells
// of accelerators go to fused cells that only CUDA implements. The generic op
// path (AsyncFallback.cpp) runs an op's CPU kernel, so for these it has
// nothing to run. Their kernels in this folder do by hand what the generic
// path does for other ops:
//  1. on the calling thread, check the arguments and compute the output sizes,
//     so that a bad call raises at the call, with a message naming the
//     problem, and not at the next synchronize;
//  2. allocate the outputs on the current stream (the caching allocator);
//  3. queue ONE task on that stream (launchHostMath) that computes the results
//     with CPU ops over CPU views of the device memory and copies them into
//     the outputs. The task lists what it reads and writes, so a task that
//     fails, is discarded or reads poisoned memory poisons its outputs
//     exactly like any other op's (Note [Poisoned memory]).
// The CPU ops run on an executor below autograd (runKernel in OpLauncher.h),
// so they never record a graph; the autograd of these ops is PyTorch's own
// (derivatives.yaml), above PrivateUse1. A result is copied into its output,
// converting the dtype: the math may run in a wider type (float for half
// inputs) than the outputs.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <initializer_list>
#include <type_traits>
#include <utility>

#include "aten/OpLauncher.h"
#include "aten/OpTask.h"
#include "core/NPUException.h"
#include "core/NPUStream.h"

namespace c10_npu::aten {

// CPU tensors handed to and returned by a host-math function; undefined
// tensors stand for absent optional arguments and masked outputs.
using HostTensors = c10::SmallVector<at::Tensor, 6>;

// The npu device of the defined tensors among `tensors`. Raises, naming
// `op`, if one of them is not an npu tensor or they are on different npu
// devices, or if none is defined. Thread-safe.
c10::DeviceIndex commonNpuDevice(const char* op, c10::ArrayRef<at::Tensor> tensors);

// Raises, naming `op` and the arguments, if a defined tensor of `tensors`
// has another dtype than tensors[0]. `names` has one entry per tensor.
// Thread-safe.
void checkSameDtype(const char* op, std::initializer_list<const char*> names,
                    c10::ArrayRef<at::Tensor> tensors);

// `t` in the dtype host math computes it in (inside tasks): float for half
// and bfloat16, as CUDA accumulates them; other tensors, and undefined ones,
// unchanged. Thread-safe.
at::Tensor widened(const at::Tensor& t);

namespace detail {
// Copies results[i] into outputs[i] (CPU views of the outputs) for every
// defined output, after checking that the shapes agree. Runs in the task.
void copyHostResults(const char* op, const HostTensors& outputs, const HostTensors& results);
}  // namespace detail

// Queues compute(inputs) as one task named `name` (static storage) on
// `stream`. `inputs` are npu tensors of the stream's device or undefined; the
// task hands them to `compute` as CPU views, in order. `outputs` are npu
// tensors (usually fresh ones) or undefined; `compute` returns one CPU
// tensor per output (any tensor for an undefined output) and the task copies
// each into its output. See Note [Kernels composed of CPU ops]. Thread-safe.
template <typename F>
void launchHostMath(const NPUStream& stream, const char* name, c10::ArrayRef<at::Tensor> inputs,
                    c10::ArrayRef<at::Tensor> outputs, F&& compute) {
  TaskAccess access;
  HostTensors capturedInputs;
  for (const at::Tensor& t : inputs) {
    access.read(t);
    capturedInputs.push_back(t.defined() ? detail::captureForTask(t, stream) : t);
  }
  HostTensors capturedOutputs;
  for (const at::Tensor& t : outputs) {
    access.write(t);
    capturedOutputs.push_back(t.defined() ? detail::captureForTask(t, stream) : t);
  }
  launchKernel(stream, name, std::move(access),
               [name, in = std::move(capturedInputs), out = std::move(capturedOutputs),
                compute = std::forward<F>(compute)]() {
                 HostTensors views;
                 for (const at::Tensor& t : in) views.push_back(detail::kernelView(t));
                 HostTensors outViews;
                 for (const at::Tensor& t : out) outViews.push_back(detail::kernelView(t));
                 detail::copyHostResults(name, outViews, compute(views));
               });
}

}  // namespace c10_npu::aten
