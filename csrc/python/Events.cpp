// torch_npu._C._NPUEventBase: the C base of torch_npu.npu.Event and
// ExternalEvent. Layer: binding; the semantics are the core's (NPUEvent,
// NPUExternalEvent, NPUIpcEvent).
//
// _NPUEventBase subclasses torch._C.Event (THPEvent) and owns a
// c10_npu::NPUEvent, an NPUExternalEvent for ExternalEvent, or an NPUIpcEvent
// for an interprocess event (Note [Inter-process events]). Calls on one event
// object are serialised by a mutex taken after the GIL is released, so
// waiting methods never hold the GIL and two threads sharing an event never
// race inside NPUEvent (which is not thread-safe by itself). Event.record and
// query are plain CPython entry points (benchmarks/bench_streams.py).
#include <Python.h>

#include <torch/csrc/Device.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Stream.h>
#include <torch/csrc/utils/object_ptr.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <string>

#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/NPUExternalEvent.h"
#include "core/NPUFunctions.h"
#include "core/NPUIpcEvent.h"
#include "core/NPUStream.h"
#include "python/Init.h"
#include "python/StreamArgs.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

constexpr auto kNpu = c10::DeviceType::PrivateUse1;

PyTypeObject NPUEventType;

struct NPUEventObject {
  THPEvent base;
  NPUEvent* event;             // plain events
  NPUExternalEvent* external;  // ExternalEvent (graph_external=True)
  NPUIpcEvent* ipc;            // interprocess=True, or from_ipc_handle
  std::mutex* mutex;           // serialises calls on this object (see top note)
};

NPUEventObject* asEvent(PyObject* obj) { return reinterpret_cast<NPUEventObject*>(obj); }

PyObject* eventNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  HANDLE_TH_ERRORS
  int enableTiming = 0;
  int blocking = 0;
  int interprocess = 0;
  int external = 0;
  static const char* kwlist[] = {"enable_timing", "blocking", "interprocess", "graph_external",
                                 nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pppp", const_cast<char**>(kwlist), &enableTiming,
                                   &blocking, &interprocess, &external)) {
    return nullptr;
  }
  TORCH_CHECK(!interprocess || (!enableTiming && !external),
              "Event(interprocess=True) needs enable_timing=False and no graph_external: an "
              "interprocess event measures no time (as CUDA's).",
              NPU_ERROR_SUFFIX);
  if (interprocess) ensureInitialized();
  THPObjectPtr ptr(type->tp_alloc(type, 0));
  if (!ptr) return nullptr;
  auto* self = asEvent(ptr.get());
  new (&self->base.event) c10::Event(kNpu);
  self->mutex = new std::mutex();
  if (external) {
    self->external = new NPUExternalEvent();
  } else if (interprocess) {
    self->ipc = NPUIpcEvent::create(current_device()).release();  // Note [Inter-process events]
  } else {
    unsigned flags = enableTiming ? npuEventDefault : npuEventDisableTiming;
    if (blocking) flags |= npuEventBlockingSync;
    self->event = new NPUEvent(flags);
  }
  return ptr.release();
  END_HANDLE_TH_ERRORS
}

void eventDealloc(PyObject* obj) {
  auto* self = asEvent(obj);
  delete self->event;
  delete self->external;
  delete self->ipc;
  delete self->mutex;
  self->event = nullptr;
  self->external = nullptr;
  self->ipc = nullptr;
  self->mutex = nullptr;
  self->base.event
      .~Event();  // never used (our methods override torch.Event's), so no backend event
  THPEvent_dealloc_common(&self->base);  // clears weakrefs, then calls tp_free
}

PyObject* eventGetDevice(PyObject* obj, void*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  std::optional<c10::Device> d;
  {
    pybind11::gil_scoped_release nogil;  // before the mutex: see withEvent
    std::lock_guard<std::mutex> lock(*self->mutex);
    if (self->ipc != nullptr) {
      d = c10::Device(kNpu, self->ipc->device_index());
    } else {
      d = self->external != nullptr ? self->external->device() : self->event->device();
    }
  }
  if (!d) Py_RETURN_NONE;
  return THPDevice_New(*d);
  END_HANDLE_TH_ERRORS
}

PyObject* eventGetHandle(PyObject* obj, void*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  npuEvent_t e = nullptr;
  {
    pybind11::gil_scoped_release nogil;  // before the mutex: see withEvent
    std::lock_guard<std::mutex> lock(*self->mutex);
    if (self->ipc == nullptr) {  // an interprocess event has no runtime event
      e = self->external != nullptr ? self->external->event() : self->event->event();
    }
  }
  return PyLong_FromVoidPtr(e);
  END_HANDLE_TH_ERRORS
}

// Runs fn(event) with the GIL released and the object's mutex held. Every
// holder of the mutex releases the GIL first: the trace hooks of a record,
// wait or synchronize take the GIL under it (Note [Trace hooks] in
// core/NPUTrace.h), which would deadlock with a thread that waits for the
// mutex while it holds the GIL.
template <typename F>
void withEvent(NPUEventObject* self, F&& fn) {
  pybind11::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(*self->mutex);
  fn();
}

void requirePlain(NPUEventObject* self, const char* api) {
  TORCH_CHECK(self->ipc == nullptr, "An interprocess event does not support ", api,
              ": it measures no time (created with enable_timing=False).", NPU_ERROR_SUFFIX);
  TORCH_CHECK(self->event != nullptr, "ExternalEvent does not support ", api,
              "; it only supports record(), wait() and reset().", NPU_ERROR_SUFFIX);
}

PyObject* eventRecord(PyObject* obj, PyObject* arg) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  if (arg != Py_None && !pyIsNpuStream(arg) && THPStream_Check(arg)) {
    const auto type = static_cast<c10::DeviceType>(reinterpret_cast<THPStream*>(arg)->device_type);
    TORCH_CHECK(type == kNpu, "Event device type ", c10::DeviceType::PrivateUse1,
                " does not match recording stream's device type ", type, ".", NPU_ERROR_SUFFIX);
  }
  ensureInitialized();  // Note [Configuration is validated at initialisation]
  const NPUStream s = pyStreamArgOrCurrent(
      arg, self->external != nullptr ? "ExternalEvent.record" : "Event.record");
  withEvent(self, [&] {
    if (self->ipc != nullptr) {
      self->ipc->record(s);
    } else if (self->external != nullptr) {
      self->external->record(s);
    } else {
      self->event->record(s);
    }
  });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* eventWait(PyObject* obj, PyObject* arg) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  ensureInitialized();  // Note [Configuration is validated at initialisation]
  const NPUStream s =
      pyStreamArgOrCurrent(arg, self->external != nullptr ? "ExternalEvent.wait" : "Event.wait");
  withEvent(self, [&] {
    if (self->ipc != nullptr) {
      self->ipc->block(s);
    } else if (self->external != nullptr) {
      self->external->wait(s);
    } else {
      self->event->block(s);
    }
  });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* eventReset(PyObject* obj, PyObject* arg) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  ensureInitialized();  // Note [Configuration is validated at initialisation]
  const NPUStream s = pyStreamArgOrCurrent(arg, "ExternalEvent.reset");
  TORCH_CHECK(self->external != nullptr, "API reset() only support ACL_EVENT_EXTERNAL flag event.",
              NPU_ERROR_SUFFIX);
  withEvent(self, [&] { self->external->reset(s); });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* eventQuery(PyObject* obj, PyObject*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  bool done = false;
  if (self->ipc != nullptr) {
    withEvent(self, [&] { done = self->ipc->query(); });
    return PyBool_FromLong(done);
  }
  requirePlain(self, "query()");
  withEvent(self, [&] { done = self->event->query(); });
  return PyBool_FromLong(done);
  END_HANDLE_TH_ERRORS
}

PyObject* eventSynchronize(PyObject* obj, PyObject*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  if (self->ipc != nullptr) {
    // Without the object's mutex: the wait may last long, and record() from
    // another thread is what ends it.
    pybind11::gil_scoped_release nogil;
    self->ipc->synchronize();
    Py_RETURN_NONE;
  }
  requirePlain(self, "synchronize()");
  withEvent(self, [&] { self->event->synchronize(); });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* eventElapsedTime(PyObject* obj, PyObject* arg) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  TORCH_CHECK_TYPE(PyObject_TypeCheck(arg, &NPUEventType),
                   "elapsed_time expects a torch_npu.npu.Event, but got ", Py_TYPE(arg)->tp_name);
  auto* other = asEvent(arg);
  requirePlain(self, "elapsed_time()");
  requirePlain(other, "elapsed_time()");
  float ms = 0;
  {
    pybind11::gil_scoped_release nogil;
    // Lock both in address order (a.elapsed_time(b) racing b.elapsed_time(a)).
    std::mutex* first = self->mutex < other->mutex ? self->mutex : other->mutex;
    std::mutex* second = self->mutex < other->mutex ? other->mutex : self->mutex;
    std::lock_guard<std::mutex> l1(*first);
    std::unique_lock<std::mutex> l2;
    if (second != first) l2 = std::unique_lock<std::mutex>(*second);
    ms = self->event->elapsed_time(*other->event);
  }
  return PyFloat_FromDouble(ms);
  END_HANDLE_TH_ERRORS
}

PyObject* eventRecordedTime(PyObject* obj, PyObject*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  requirePlain(self, "recorded_time()");
  uint64_t us = 0;
  withEvent(self, [&] { us = self->event->recorded_time(); });
  return PyLong_FromUnsignedLongLong(us);
  END_HANDLE_TH_ERRORS
}

PyObject* eventIpcHandle(PyObject* obj, PyObject*) {
  HANDLE_TH_ERRORS
  auto* self = asEvent(obj);
  TORCH_CHECK(self->ipc != nullptr,
              "Event.ipc_handle() needs an event created with interprocess=True.",
              NPU_ERROR_SUFFIX);
  const std::string handle = self->ipc->handle();
  return PyBytes_FromStringAndSize(handle.data(), static_cast<Py_ssize_t>(handle.size()));
  END_HANDLE_TH_ERRORS
}

// Event.from_ipc_handle(device, handle): Note [Inter-process events].
PyObject* eventFromIpcHandle(PyObject* cls, PyObject* args, PyObject* kwargs) {
  HANDLE_TH_ERRORS
  PyObject* device = nullptr;
  PyObject* handleObj = nullptr;
  static const char* kwlist[] = {"device", "handle", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO", const_cast<char**>(kwlist), &device,
                                   &handleObj)) {
    return nullptr;
  }
  TORCH_CHECK_TYPE(PyBytes_Check(handleObj), "Event.from_ipc_handle: handle must be bytes (from ",
                   "Event.ipc_handle()), got ", Py_TYPE(handleObj)->tp_name);
  char* bytes = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(handleObj, &bytes, &size) != 0) return nullptr;
  ensureInitialized();
  const c10::DeviceIndex index = pyDeviceArg(device);
  auto ipc = NPUIpcEvent::open(index, std::string(bytes, static_cast<size_t>(size)));
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  THPObjectPtr ptr(type->tp_alloc(type, 0));
  if (!ptr) return nullptr;
  auto* self = asEvent(ptr.get());
  new (&self->base.event) c10::Event(kNpu);
  self->mutex = new std::mutex();
  self->ipc = ipc.release();
  return ptr.release();
  END_HANDLE_TH_ERRORS
}

PyGetSetDef eventGetSet[] = {
    {const_cast<char*>("device"), eventGetDevice, nullptr, nullptr, nullptr},
    {const_cast<char*>("npu_event"), eventGetHandle, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef eventMethods[] = {
    {"from_ipc_handle",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(eventFromIpcHandle)),
     METH_CLASS | METH_VARARGS | METH_KEYWORDS, nullptr},
    {"record", eventRecord, METH_O, nullptr},
    {"wait", eventWait, METH_O, nullptr},
    {"reset", eventReset, METH_O, nullptr},
    {"query", eventQuery, METH_NOARGS, nullptr},
    {"synchronize", eventSynchronize, METH_NOARGS, nullptr},
    {"elapsed_time", eventElapsedTime, METH_O, nullptr},
    {"recorded_time", eventRecordedTime, METH_NOARGS, nullptr},
    {"ipc_handle", eventIpcHandle, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void initEvents(py::module_& m) {
  TORCH_CHECK(THPEventClass != nullptr, "import torch before torch_npu._C");
  PyTypeObject& et = NPUEventType;
  et.tp_name = "torch_npu._C._NPUEventBase";
  et.tp_basicsize = sizeof(NPUEventObject);
  et.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  et.tp_doc = "C base of torch_npu.npu.Event and ExternalEvent: a torch.Event of the npu device.";
  et.tp_dealloc = eventDealloc;
  et.tp_methods = eventMethods;
  et.tp_getset = eventGetSet;
  et.tp_new = eventNew;
  pyReadyType(&et, THPEventClass, m.ptr(), "_NPUEventBase");
}

}  // namespace c10_npu::python
