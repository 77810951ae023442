// How the bindings read stream and device arguments from Python, with the
// messages of Streams.cpp's own entry points (defined there). Layer: binding.
//
// Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include <c10/core/Device.h>

#include "core/NPUStream.h"

namespace c10_npu::python {

// A stream argument: a torch_npu stream, or any torch.Stream of an npu device
// (validated); TypeError naming `api` otherwise.
NPUStream pyStreamArg(PyObject* obj, const char* api);
// As pyStreamArg; None (or nullptr) is the current stream of the current device.
NPUStream pyStreamArgOrCurrent(PyObject* obj, const char* api);
// True for an instance of torch_npu._C._NPUStreamBase.
bool pyIsNpuStream(PyObject* obj);
// A device argument: None → -1 (current), int, 'npu[:N]', torch.device.
c10::DeviceIndex pyDeviceArg(PyObject* obj);
// PyType_Ready of `type` on `base`, added to `module` as `attr`.
void pyReadyType(PyTypeObject* type, PyTypeObject* base, PyObject* module, const char* attr);

}  // namespace c10_npu::python
