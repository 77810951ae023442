// torch_npu's host callbacks: _launch_host_func, _launch_host_func_pending,
// _subscribe_report, _unsubscribe_report (and our older names on top of
// them, in torch_npu/npu/graphs.py). Layer: binding (they call Python).
//
// Note [Host callbacks]
// ~~~~~~~~~~~~~~~~~~~~~
// _launch_host_func(stream, fn, user_data) queues a task on `stream` that
// calls fn(user_data) with the GIL: it runs after the work queued on the
// stream before it, and the stream's later work waits for it (torch_npu's
// blocking callback). The task goes through the task queue like every
// launch, so callbacks are ordered with the ops around them; under capture it
// is recorded like an op and runs at every replay. An exception raised by fn
// is reported through sys.unraisablehook (as torch_npu's PyErr_WriteUnraisable)
// and is not a task failure: the stream goes on. torch_npu runs callbacks on a
// report thread that _subscribe_report starts; here an executor thread runs
// them, which needs no subscription, so _subscribe_report/_unsubscribe_report
// only keep torch_npu's bookkeeping (and _unsubscribe_report waits for the
// stream's callbacks, as torch_npu's does). Holding the GIL on an executor is
// safe because every host wait of this backend releases the GIL first.
// _launch_host_func_pending(stream, fn, user_data) does not hold the stream:
// its task schedules fn(user_data) on the main interpreter thread
// (Py_AddPendingCall), as torch_npu's does.
// _npu_launchHostTask(stream, fn, user_data) is ours, for work computed on
// the host in stream order (torch.compile's npu graphs, Note [Compiled npu
// graphs run as stream tasks] in torch_npu/_inductor/_compile.py): as
// _launch_host_func, but an exception raised by fn is a task failure of the
// stream (Note [Task failure rule]), reported with its message by the
// stream's next synchronize or query, never swallowed.
// The Python objects are released on host threads (Note [Task captures are
// released on producer threads] in csrc/aten/OpLauncher.h).
#include <torch/csrc/utils/pybind.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "aten/OpLauncher.h"
#include "core/ExternalStreams.h"
#include "core/TaskQueue.h"
#include "python/StreamArgs.h"

namespace py = pybind11;

namespace c10_npu::python {


namespace {

// fn and user_data, owned (strong references).
struct Callback {
  Callback(PyObject* f, PyObject* d) : fn(f), data(d) {}  // adopts the references
  Callback(const Callback&) = delete;
  Callback& operator=(const Callback&) = delete;
  PyObject* fn;
  PyObject* data;
  ~Callback() {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;  // leak at exit rather than crash
    PyGILState_STATE state = PyGILState_Ensure();
    Py_XDECREF(fn);
    Py_XDECREF(data);
    PyGILState_Release(state);
  }
};
using CallbackPtr = std::shared_ptr<Callback>;

// Calls fn(data) with the GIL held; reports an exception as unraisable.
void callWithGil(const Callback& cb) {
  PyObject* result = PyObject_CallOneArg(cb.fn, cb.data);
  if (result == nullptr) {
    PyErr_WriteUnraisable(cb.fn);
    PyErr_Clear();
  } else {
    Py_DECREF(result);
  }
}

int runBlocking(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return 0;
  PyGILState_STATE state = PyGILState_Ensure();
  callWithGil(**static_cast<CallbackPtr*>(user));
  PyGILState_Release(state);
  return 0;
}

// Writes "<type>: <message>" of the pending Python exception into buf and
// clears it. Needs the GIL.
void takeErrorMessage(char* buf, size_t size) {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
  const char* message = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
  if (message == nullptr) PyErr_Clear();  // the message itself failed: keep the type
  const char* typeName =
      type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  std::snprintf(buf, size, "%s: %s", typeName, message != nullptr ? message : "(no message)");
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
}

int runFailing(void* user, char* errorBuf, size_t errorBufSize) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return 0;
  PyGILState_STATE state = PyGILState_Ensure();
  const Callback& cb = **static_cast<CallbackPtr*>(user);
  PyObject* result = PyObject_CallOneArg(cb.fn, cb.data);
  int status = 0;
  if (result == nullptr) {
    takeErrorMessage(errorBuf, errorBufSize);
    status = 1;
  } else {
    Py_DECREF(result);
  }
  PyGILState_Release(state);
  return status;
}

int pendingHandler(void* arg) {
  std::unique_ptr<CallbackPtr> cb(static_cast<CallbackPtr*>(arg));
  callWithGil(**cb);
  return 0;  // the exception was reported: do not raise it into unrelated code
}

int runPending(void* user, char* /*errorBuf*/, size_t /*errorBufSize*/) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return 0;
  auto copy = std::make_unique<CallbackPtr>(*static_cast<CallbackPtr*>(user));
  if (Py_AddPendingCall(&pendingHandler, copy.get()) == 0) (void)copy.release();
  return 0;
}

void destroyCallback(void* user) { delete static_cast<CallbackPtr*>(user); }

void releaseCallback(void* user) {
  // May run on an executor: drop the references on a host thread.
  aten::detail::deferRelease(user, &destroyCallback);
}

enum class Mode { kBlocking, kPending, kFailing };

void launch(const char* api, py::handle s, py::handle fn, py::handle data, Mode mode) {
  const NPUStream stream = pyStreamArg(s.ptr(), api);
  external::checkManagedOnly(stream, api);
  TORCH_CHECK_TYPE(PyCallable_Check(fn.ptr()), api, " expects a callable, but got ",
                   Py_TYPE(fn.ptr())->tp_name);
  auto cb = std::make_unique<CallbackPtr>(
      std::make_shared<Callback>(fn.inc_ref().ptr(), data.inc_ref().ptr()));
  npuTask task{};
  switch (mode) {
    case Mode::kBlocking:
      task.name = "host callback";
      task.run = &runBlocking;
      break;
    case Mode::kPending:
      task.name = "host callback (pending)";
      task.run = &runPending;
      break;
    case Mode::kFailing:
      task.name = "host task";
      task.run = &runFailing;
      break;
  }
  task.release = &releaseCallback;
  task.userData = cb.release();
  aten::detail::releaseDeferred();
  py::gil_scoped_release noGil;  // the queue may run a direct launch that waits
  queue::launch(stream, task);   // owns userData from here on, also on failure
}

struct Subscriptions {
  std::mutex mutex;
  std::set<std::pair<int, c10::StreamId>> streams;
};

Subscriptions& subscriptions() {
  static auto* s = std::make_unique<Subscriptions>().release();  // leaked: used at exit
  return *s;
}

}  // namespace

void initHostCallbacks(py::module_& m) {
  m.def("_launch_host_func", [](py::handle s, py::handle fn, py::handle data) {
    launch("launch_callback", s, fn, data, Mode::kBlocking);
  });
  m.def("_launch_host_func_pending", [](py::handle s, py::handle fn, py::handle data) {
    launch("launch_callback", s, fn, data, Mode::kPending);
  });
  m.def("_npu_launchHostTask", [](py::handle s, py::handle fn, py::handle data) {
    launch("_npu_launchHostTask", s, fn, data, Mode::kFailing);
  });
  m.def("_subscribe_report", [](py::handle s) {
    const NPUStream stream = pyStreamArg(s.ptr(), "subscribe_report");
    external::checkManagedOnly(stream, "subscribe_report");
    std::lock_guard<std::mutex> lock(subscriptions().mutex);
    subscriptions().streams.emplace(stream.device_index(), stream.id());
  });
  m.def("_unsubscribe_report", [](py::handle s) {
    const NPUStream stream = pyStreamArg(s.ptr(), "unsubscribe_report");
    external::checkManagedOnly(stream, "unsubscribe_report");
    {
      // The callbacks need the GIL: do not hold it while waiting for them.
      py::gil_scoped_release noGil;
      stream.synchronize();
    }
    std::lock_guard<std::mutex> lock(subscriptions().mutex);
    subscriptions().streams.erase({stream.device_index(), stream.id()});
  });
}

}  // namespace c10_npu::python
