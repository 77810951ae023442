// torch_npu._C._NPUStreamBase and the stream functions of torch_npu.npu
// (current_stream, set_stream, stream contexts, limits). The event type is
// in Events.cpp; StreamArgs.h is how it reads stream and device arguments.
//
// Layer: binding.
//
// _NPUStreamBase subclasses torch._C.Stream (THPStream), so every npu stream
// is a torch.Stream and PyTorch's generic code accepts it. The (stream_id,
// device_index, device_type) triple of THPStream *is* the stream, validated
// once at construction (NPUStream::unpack3 or a pool / the external
// registry); the only field added is a cache of the runtime handle (Note
// [Stream hash and repr do not drain]). A stream argument that is only a
// torch.Stream (not one of ours) is validated again on every use, so a
// generic stream of another device type never reaches the core as if it were
// an npu stream.
//
// Hot paths (current_stream, stream context enter/exit, ExternalStream(ptr),
// Event.record/query) are plain CPython entry points without pybind11's
// argument machinery. See benchmarks/bench_streams.py.
#include <Python.h>
#include <structmember.h>

#include <torch/csrc/Device.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Stream.h>
#include <torch/csrc/utils/object_ptr.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_strings.h>

#include <climits>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>

#include "aten/OpLauncher.h"
#include "core/ExternalStreams.h"
#include "core/NPUEvent.h"
#include "core/NPUException.h"
#include "core/NPUExternalEvent.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/StreamLimits.h"
#include "python/Init.h"
#include "python/StreamArgs.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

constexpr auto kNpu = c10::DeviceType::PrivateUse1;

PyTypeObject NPUStreamType;
// The Python class current_stream()/default_stream() build (torch_npu.npu.Stream,
// registered by streams.py); the base type until then.
PyTypeObject* gStreamClass = &NPUStreamType;

// ---------------------------------------------------------------------------
// Argument helpers
// ---------------------------------------------------------------------------

// device argument: None → -1 (current device), int, 'npu[:N]',
// torch.device('npu[:N]'). Negative ints: -1 is the current device; other
// negative values are the current device too when `lenient` (the Stream
// constructor, like torch_npu's `with device(d)`), else "Invalid device_index".
// Other device types: ValueError.
c10::DeviceIndex parseDevice(PyObject* obj, bool lenient = false) {
  if (obj == nullptr || obj == Py_None) return -1;
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) throw python_error();
    if (overflow != 0) {
      // Beyond 64 bits: still "Invalid device_index", not an OverflowError
      // that names no argument.
      THPObjectPtr text(PyObject_Str(obj));
      if (!text) throw python_error();
      TORCH_CHECK(overflow < 0 && lenient,
                  "Invalid device_index: ", THPUtils_unpackString(text.get()),
                  ". Expected a device index in [0, ",
                  static_cast<int>(device_count_ensure_non_zero()), ") or -1.", NPU_ERROR_SUFFIX);
      return -1;
    }
    if (v == -1 || (v < 0 && lenient)) return -1;
    const c10::DeviceIndex count = device_count_ensure_non_zero();
    TORCH_CHECK(v >= 0 && v < count, "Invalid device_index: ", v,
                ". Expected a device index in [0, ", static_cast<int>(count), ") or -1.",
                NPU_ERROR_SUFFIX);
    return static_cast<c10::DeviceIndex>(v);
  }
  c10::Device d(c10::DeviceType::CPU);
  if (THPDevice_Check(obj)) {
    d = reinterpret_cast<THPDevice*>(obj)->device;
  } else if (PyUnicode_Check(obj)) {
    d = c10::Device(THPUtils_unpackString(obj));
  } else {
    TORCH_CHECK_TYPE(false, "Expected a torch.device, str, int or None as device, but got ",
                     Py_TYPE(obj)->tp_name);
  }
  TORCH_CHECK_VALUE(d.type() == kNpu, "Expected a npu device, but got: ", d);
  return d.has_index() ? checkedDeviceIndex(d.index()) : -1;
}

// Validates a triple from Python. Ranges are checked before narrowing, so
// device_index 999 is "Invalid device_index: 999", not a wrapped int8. The
// device type is checked before the index: a stream of another device (e.g.
// torch.Stream(device="cpu"), whose index is -1) is named as such, not as
// "Invalid device_index: -1". `api` prefixes that message when given.
NPUStream unpackChecked(int64_t stream_id, int64_t device_index, int64_t device_type,
                        const char* api = nullptr) {
  TORCH_CHECK(device_type >= 0 &&
                  device_type < static_cast<int64_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES),
              "Invalid device_type: ", device_type, ". Expected the npu device type ",
              static_cast<int>(kNpu), NPU_ERROR_SUFFIX);
  if (device_type != static_cast<int64_t>(kNpu)) {
    const auto type = static_cast<c10::DeviceType>(device_type);
    TORCH_CHECK(false, api != nullptr ? api : "", api != nullptr ? ": " : "",
                "Expected a npu stream, but got a stream of device ",
                c10::DeviceTypeName(type, /*lower_case=*/true), " (device_type ", device_type,
                "). Pass a torch_npu.npu.Stream or a torch.Stream of an npu device.",
                NPU_ERROR_SUFFIX);
  }
  TORCH_CHECK(device_index >= 0 && device_index < device_count_ensure_non_zero(),
              "Invalid device_index: ", device_index, NPU_ERROR_SUFFIX);
  return NPUStream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device_index),
                            static_cast<c10::DeviceType>(device_type));
}

bool isOurStream(PyObject* obj) { return PyObject_TypeCheck(obj, &NPUStreamType); }

NPUStream trustedStream(PyObject* obj) {
  auto* s = reinterpret_cast<THPStream*>(obj);
  return NPUStream(NPUStream::UNCHECKED,
                   c10::Stream(c10::Stream::UNSAFE,
                               c10::Device(kNpu, static_cast<c10::DeviceIndex>(s->device_index)),
                               s->stream_id));
}

// A stream argument: one of ours (validated at construction), or any
// torch.Stream (validated now). `api` names the caller in the TypeError.
NPUStream streamArg(PyObject* obj, const char* api) {
  if (isOurStream(obj)) return trustedStream(obj);
  TORCH_CHECK_TYPE(obj != nullptr && THPStream_Check(obj), api,
                   " expects a torch_npu.npu.Stream, but got ",
                   obj == nullptr ? "nothing" : Py_TYPE(obj)->tp_name);
  auto* s = reinterpret_cast<THPStream*>(obj);
  return unpackChecked(s->stream_id, s->device_index, s->device_type, api);
}

// As streamArg, None → the current stream of the current device.
NPUStream streamArgOrCurrent(PyObject* obj, const char* api) {
  if (obj == nullptr || obj == Py_None) return getCurrentNPUStream(-1);
  return streamArg(obj, api);
}

// Note [Stream hash and repr do not drain]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu defines Stream.__hash__ as hash((npu_stream, device)) and puts
// npu_stream in the repr, but reading npu_stream drains the task queue (Note
// [Task queue drain rule]): a host sync per dict lookup. And for an external
// stream the registry refuses the handle once the stream was destroyed, so a
// dict keyed by the wrapper could no longer even pop it. A stream's handle
// never changes, so hash and repr read `_raw_npu_stream` instead: the same
// value, without the drain, cached in the object. The cache is filled when
// the handle is known without a lookup (ExternalStream(ptr)), when an
// external id is validated (its entry is alive then), or on first read.
struct NPUStreamObject {
  THPStream base;
  uint64_t handle;  // 0 = not known yet; written with the GIL held
};

void cacheHandle(PyObject* obj, uint64_t handle) {
  reinterpret_cast<NPUStreamObject*>(obj)->handle = handle;
}

PyObject* wrapStream(PyTypeObject* cls, const NPUStream& s, uint64_t handle = 0) {
  PyObject* obj = cls->tp_alloc(cls, 0);
  if (obj == nullptr) return nullptr;
  auto* self = reinterpret_cast<THPStream*>(obj);
  self->stream_id = s.id();
  self->device_index = s.device_index();
  self->device_type = static_cast<int64_t>(s.device_type());
  if (handle == 0 && s.isExternal()) {
    // An external stream's entry may be destroyed later: learn the handle
    // while it is alive. If it is dead already, leave it to the first read
    // (which raises the registry's "was destroyed" error).
    try {
      handle = reinterpret_cast<uint64_t>(s.rawHandle());
    } catch (const c10::Error&) {
      handle = 0;
    }
  }
  cacheHandle(obj, handle);
  return obj;
}

// ---------------------------------------------------------------------------
// _NPUStreamBase
// ---------------------------------------------------------------------------

// The device an ExternalStream asks for: `device`, or the `device_index`
// keyword, which names a device just as `device` does (an explicit index that
// disagrees with the handle's device is the registry's "belongs to device"
// error, never a silent switch to the handle's device). -1 or None: the
// handle's own device. Both given and different: ValueError.
c10::DeviceIndex externalDevice(PyObject* device, bool deviceIndexGiven, long long deviceIndex) {
  const c10::DeviceIndex fromDevice = parseDevice(device);
  if (!deviceIndexGiven || deviceIndex == -1) return fromDevice;
  const c10::DeviceIndex count = device_count_ensure_non_zero();
  TORCH_CHECK(deviceIndex >= 0 && deviceIndex < count, "Invalid device_index: ", deviceIndex,
              ". Expected a device index in [0, ", static_cast<int>(count), ") or -1.",
              NPU_ERROR_SUFFIX);
  const auto fromIndex = static_cast<c10::DeviceIndex>(deviceIndex);
  TORCH_CHECK_VALUE(fromDevice == -1 || fromDevice == fromIndex,
                    "ExternalStream: device=npu:", static_cast<int>(fromDevice),
                    " and device_index=", deviceIndex,
                    " name different devices. Pass only one of them (or neither, to use the "
                    "stream's own device).");
  return fromIndex;
}

// Priority argument: any int. torch_npu's rule (<= -1 high, else normal)
// covers every value, so ints beyond 32 bits saturate instead of raising an
// OverflowError that names no argument.
int parsePriority(PyObject* obj) {
  TORCH_CHECK_TYPE(PyLong_Check(obj), "Stream expects priority to be an int, but got ",
                   Py_TYPE(obj)->tp_name);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (v == -1 && PyErr_Occurred()) throw python_error();
  if (overflow != 0) return overflow < 0 ? INT_MIN : INT_MAX;
  if (v < INT_MIN) return INT_MIN;
  if (v > INT_MAX) return INT_MAX;
  return static_cast<int>(v);
}

// tripleGiven: stream_id, device_index or device_type was passed. Then the
// triple is validated and used (even if all zero, which torch_npu silently
// turns into a pool stream).
// deviceIndexGiven: device_index was passed. With stream_ptr it is a device
// request, exactly like `device` (see externalDevice). handleOut receives the
// runtime handle when it is known without a lookup (stream_ptr), else 0.
NPUStream resolveStream(PyObject* device, int priority, int isSyncLaunch, long long streamId,
                        long long deviceIndex, long long deviceType, PyObject* streamPtr,
                        bool tripleGiven = false, bool deviceIndexGiven = false,
                        uint64_t* handleOut = nullptr) {
  if (streamPtr != nullptr && streamPtr != Py_None) {
    TORCH_CHECK(priority == 0, "Priority was explicitly set for an external stream",
                NPU_ERROR_SUFFIX);
    TORCH_CHECK(isSyncLaunch == 0, "is_sync_launch was explicitly set for an external stream",
                NPU_ERROR_SUFFIX);
    TORCH_CHECK_TYPE(PyLong_Check(streamPtr) && !PyBool_Check(streamPtr),
                     "ExternalStream expects stream_ptr to be an int (an npuStream_t handle), "
                     "but got ",
                     Py_TYPE(streamPtr)->tp_name);
    // Beyond torch_npu: never fall back to the unpack path silently.
    TORCH_CHECK_VALUE(streamId == 0 && deviceType == 0,
                      "ExternalStream: stream_ptr cannot be combined with stream_id or "
                      "device_type (got stream_id=",
                      streamId, ", device_type=", deviceType,
                      "). Wrap a raw handle with stream_ptr (and optionally device), or rebuild a "
                      "stream from its (stream_id, device_index, device_type) without "
                      "stream_ptr.");
    const unsigned long long ptr = PyLong_AsUnsignedLongLong(streamPtr);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      TORCH_CHECK_VALUE(false, "ExternalStream expects stream_ptr to be a non-negative 64-bit "
                               "handle, but got a value out of range");
    }
    // Beyond torch_npu: 0 is "no stream", never a pool stream.
    TORCH_CHECK_VALUE(ptr != 0,
                      "ExternalStream(0): 0 is not a stream handle (it means 'no stream'). Pass "
                      "the npuStream_t of a stream created with npuStreamCreate.");
    const NPUStream s =
        getStreamFromExternal(reinterpret_cast<npuStream_t>(static_cast<uintptr_t>(ptr)),
                              externalDevice(device, deviceIndexGiven, deviceIndex));
    if (handleOut != nullptr) *handleOut = ptr;
    return s;
  }
  if (tripleGiven || streamId != 0 || deviceIndex != 0 || deviceType != 0) {
    return unpackChecked(streamId, deviceIndex, deviceType);
  }
  const c10::DeviceIndex d = parseDevice(device, /*lenient=*/true);
  return isSyncLaunch != 0 ? getNPUStreamFromSyncLaunchPool(d) : getStreamFromPool(priority, d);
}

PyObject* streamNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  HANDLE_TH_ERRORS
  PyObject* device = Py_None;
  PyObject* priorityObj = nullptr;
  int isSyncLaunch = 0;
  long long streamId = 0;
  long long deviceIndex = 0;
  long long deviceType = 0;
  PyObject* streamPtr = Py_None;
  static const char* kwlist[] = {"device",      "priority",    "is_sync_launch", "stream_id",
                                 "device_index", "device_type", "stream_ptr",     nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOiLLLO", const_cast<char**>(kwlist), &device,
                                   &priorityObj, &isSyncLaunch, &streamId, &deviceIndex,
                                   &deviceType, &streamPtr)) {
    return nullptr;
  }
  const int priority = priorityObj == nullptr ? 0 : parsePriority(priorityObj);
  ensureInitialized();  // Note [Configuration is validated at initialisation]
  bool tripleGiven = false;
  bool deviceIndexGiven = false;
  if (kwargs != nullptr) {
    for (const char* key : {"stream_id", "device_index", "device_type"}) {
      tripleGiven = tripleGiven || PyDict_GetItemString(kwargs, key) != nullptr;
    }
    deviceIndexGiven = PyDict_GetItemString(kwargs, "device_index") != nullptr;
  }
  uint64_t handle = 0;
  const NPUStream s = resolveStream(device, priority, isSyncLaunch, streamId, deviceIndex,
                                    deviceType, streamPtr, tripleGiven, deviceIndexGiven, &handle);
  return wrapStream(type, s, handle);
  END_HANDLE_TH_ERRORS
}

PyObject* streamGetDevice(PyObject* self, void*) {
  HANDLE_TH_ERRORS
  return THPDevice_New(
      c10::Device(kNpu, static_cast<c10::DeviceIndex>(reinterpret_cast<THPStream*>(self)->device_index)));
  END_HANDLE_TH_ERRORS
}

PyObject* streamGetNpuStream(PyObject* self, void*) {
  HANDLE_TH_ERRORS
  const NPUStream s = trustedStream(self);
  npuStream_t h = nullptr;
  {
    pybind11::gil_scoped_release nogil;
    h = s.stream();  // drains the task queue; see Note [Task queue drain rule]
  }
  cacheHandle(self, reinterpret_cast<uint64_t>(h));
  return PyLong_FromVoidPtr(h);
  END_HANDLE_TH_ERRORS
}

// npu_stream's value without the drain; see Note [Stream hash and repr do not
// drain]. Also readable after an external stream was destroyed, if the
// handle was learnt while it was alive (always, for ExternalStream objects).
PyObject* streamGetRawNpuStream(PyObject* self, void*) {
  HANDLE_TH_ERRORS
  auto* obj = reinterpret_cast<NPUStreamObject*>(self);
  if (obj->handle == 0) {
    obj->handle = reinterpret_cast<uint64_t>(trustedStream(self).rawHandle());
  }
  return PyLong_FromUnsignedLongLong(obj->handle);
  END_HANDLE_TH_ERRORS
}

PyObject* streamGetPriority(PyObject*, void*) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(false, "NPU dose not support Stream.get_priority() currently.", NPU_ERROR_SUFFIX);
  END_HANDLE_TH_ERRORS
}

PyObject* streamQuery(PyObject* self, PyObject*) {
  HANDLE_TH_ERRORS
  const NPUStream s = trustedStream(self);
  bool done = false;
  {
    pybind11::gil_scoped_release nogil;
    done = s.query();
  }
  return PyBool_FromLong(done);
  END_HANDLE_TH_ERRORS
}

PyObject* streamSynchronize(PyObject* self, PyObject*) {
  HANDLE_TH_ERRORS
  const NPUStream s = trustedStream(self);
  {
    pybind11::gil_scoped_release nogil;
    s.synchronize();
    aten::detail::releaseDeferred();
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* streamSetDataPreprocess(PyObject* self, PyObject* arg) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(PyBool_Check(arg), "set_data_preprocess_stream expects a bool, but got ",
                   Py_TYPE(arg)->tp_name);
  (void)trustedStream(self).rawHandle();  // a destroyed external stream raises
  // Data-preprocess streams only change scheduling on Ascend; accepted as a no-op.
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* streamPriorityRange(PyObject*, PyObject*) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(false, "NPU does not support Stream.priority_range() currently.", NPU_ERROR_SUFFIX);
  END_HANDLE_TH_ERRORS
}

PyObject* streamRichCompare(PyObject* self, PyObject* other, int op) {
  if ((op != Py_EQ && op != Py_NE) || !THPStream_Check(other)) Py_RETURN_NOTIMPLEMENTED;
  auto* a = reinterpret_cast<THPStream*>(self);
  auto* b = reinterpret_cast<THPStream*>(other);
  const bool eq = a->stream_id == b->stream_id && a->device_index == b->device_index &&
                  a->device_type == b->device_type;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

Py_hash_t streamHash(PyObject* self) {
  auto* s = reinterpret_cast<THPStream*>(self);
  const uint64_t mixed = static_cast<uint64_t>(s->stream_id) * 0x9E3779B97F4A7C15ull ^
                        static_cast<uint64_t>(s->device_index * 64 + s->device_type);
  const Py_hash_t h = static_cast<Py_hash_t>(mixed);
  return h == -1 ? -2 : h;
}

PyMemberDef streamMembers[] = {
    {const_cast<char*>("stream_id"), T_LONGLONG, offsetof(THPStream, stream_id), READONLY, nullptr},
    {const_cast<char*>("device_index"), T_LONGLONG, offsetof(THPStream, device_index), READONLY,
     nullptr},
    {const_cast<char*>("device_type"), T_LONGLONG, offsetof(THPStream, device_type), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef streamGetSet[] = {
    {const_cast<char*>("device"), streamGetDevice, nullptr, nullptr, nullptr},
    {const_cast<char*>("npu_stream"), streamGetNpuStream, nullptr,
     const_cast<char*>("The runtime handle as an int; reading it drains the task queue."), nullptr},
    {const_cast<char*>("_raw_npu_stream"), streamGetRawNpuStream, nullptr,
     const_cast<char*>("The value of npu_stream without draining the task queue (for hash and "
                       "repr)."),
     nullptr},
    {const_cast<char*>("priority"), streamGetPriority, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef streamMethods[] = {
    {"query", streamQuery, METH_NOARGS, nullptr},
    {"synchronize", streamSynchronize, METH_NOARGS, nullptr},
    {"set_data_preprocess_stream", streamSetDataPreprocess, METH_O, nullptr},
    {"priority_range", streamPriorityRange, METH_STATIC | METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

// ---------------------------------------------------------------------------
// Module functions on the hot path (plain CPython calling convention)
// ---------------------------------------------------------------------------

PyObject* currentStreamObject(PyObject*, PyObject* device) {
  HANDLE_TH_ERRORS
  return wrapStream(gStreamClass, getCurrentNPUStream(parseDevice(device)));
  END_HANDLE_TH_ERRORS
}

PyObject* defaultStreamObject(PyObject*, PyObject* device) {
  HANDLE_TH_ERRORS
  return wrapStream(gStreamClass, getDefaultNPUStream(parseDevice(device)));
  END_HANDLE_TH_ERRORS
}

PyObject* defaultCaptureStreamObject(PyObject*, PyObject* device) {
  HANDLE_TH_ERRORS
  return wrapStream(gStreamClass, getDefaultCaptureStream(parseDevice(device)));
  END_HANDLE_TH_ERRORS
}

PyObject* setStreamObject(PyObject*, PyObject* stream) {
  HANDLE_TH_ERRORS
  if (stream == Py_None) Py_RETURN_NONE;
  const NPUStream s = streamArg(stream, "set_stream");
  (void)s.rawHandle();  // a destroyed external stream raises here, not at the next op
  if (s.device_index() != current_device()) set_device(s.device_index());
  setCurrentNPUStream(s);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// Stream context: enter returns a token holding what exit restores, so the
// state lives with the entry (the caller keeps it), never on a shared object.
// Token = (previous stream id of the target device) << 16 | target << 8 | previous device.
PyObject* streamEnter(PyObject*, PyObject* stream) {
  HANDLE_TH_ERRORS
  const NPUStream s = streamArg(stream, "torch_npu.npu.stream");
  if (s.isExternal()) (void)s.rawHandle();  // destroyed external stream: raise now
  const c10::DeviceIndex prev = current_device();
  const c10::DeviceIndex target = s.device_index();
  const c10::StreamId prevId = getCurrentNPUStream(target).id();
  if (prev != target) set_device(target);
  setCurrentNPUStream(s);
  const uint64_t token = (static_cast<uint64_t>(prevId) << 16) |
                         (static_cast<uint64_t>(static_cast<uint8_t>(target)) << 8) |
                         static_cast<uint64_t>(static_cast<uint8_t>(prev));
  return PyLong_FromUnsignedLongLong(token);
  END_HANDLE_TH_ERRORS
}

PyObject* streamExit(PyObject*, PyObject* tokenObj) {
  HANDLE_TH_ERRORS
  const unsigned long long token = PyLong_AsUnsignedLongLong(tokenObj);
  if (PyErr_Occurred()) return nullptr;
  const auto prev = static_cast<c10::DeviceIndex>(token & 0xff);
  const auto target = static_cast<c10::DeviceIndex>((token >> 8) & 0xff);
  const auto prevId = static_cast<c10::StreamId>(token >> 16);
  setCurrentNPUStream(NPUStream(NPUStream::UNCHECKED,
                                c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, target), prevId)));
  if (current_device() != prev) set_device(prev);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// ExternalStream(ptr, device) without keyword parsing: (cls, stream_ptr, device).
PyObject* newExternalStream(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 3 && PyType_Check(args[0]) &&
                       PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(args[0]), &NPUStreamType),
                   "_npu_newExternalStream(cls, stream_ptr, device)");
  ensureInitialized();  // Note [Configuration is validated at initialisation]
  uint64_t handle = 0;
  const NPUStream s = resolveStream(args[2], 0, 0, 0, 0, 0, args[1], false, false, &handle);
  return wrapStream(reinterpret_cast<PyTypeObject*>(args[0]), s, handle);
  END_HANDLE_TH_ERRORS
}

// _npu_checkStreamArg(stream, api): validates a stream argument of a
// Python-level API (Stream.wait_stream, erase_stream) with the same messages
// as the C entry points: TypeError for a non-stream, RuntimeError naming the
// device for a stream of another device or a bad triple.
PyObject* checkStreamArg(PyObject*, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* stream = nullptr;
  const char* api = nullptr;
  if (!PyArg_ParseTuple(args, "Os", &stream, &api)) return nullptr;
  const NPUStream s = streamArg(stream, api);
  if (s.isExternal()) (void)s.rawHandle();  // a destroyed external stream raises here
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef moduleMethods[] = {
    {"_npu_checkStreamArg", checkStreamArg, METH_VARARGS, nullptr},
    {"_npu_newExternalStream",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(newExternalStream)), METH_FASTCALL,
     nullptr},
    {"_npu_currentStreamObject", currentStreamObject, METH_O, nullptr},
    {"_npu_defaultStreamObject", defaultStreamObject, METH_O, nullptr},
    {"_npu_defaultCaptureStreamObject", defaultCaptureStreamObject, METH_O, nullptr},
    {"_npu_setStreamObject", setStreamObject, METH_O, nullptr},
    {"_npu_streamEnter", streamEnter, METH_O, nullptr},
    {"_npu_streamExit", streamExit, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr}};

void readyType(PyTypeObject* type, PyTypeObject* base, PyObject* module, const char* attr) {
  Py_INCREF(base);
  type->tp_base = base;
  if (PyType_Ready(type) < 0) throw python_error();
  Py_INCREF(type);
  if (PyModule_AddObject(module, attr, reinterpret_cast<PyObject*>(type)) < 0) {
    throw python_error();
  }
}

}  // namespace

NPUStream pyStreamArg(PyObject* obj, const char* api) { return streamArg(obj, api); }
NPUStream pyStreamArgOrCurrent(PyObject* obj, const char* api) {
  return streamArgOrCurrent(obj, api);
}
bool pyIsNpuStream(PyObject* obj) { return isOurStream(obj); }
c10::DeviceIndex pyDeviceArg(PyObject* obj) { return parseDevice(obj); }
void pyReadyType(PyTypeObject* type, PyTypeObject* base, PyObject* module, const char* attr) {
  readyType(type, base, module, attr);
}

void initStreams(py::module_& m) {
  TORCH_CHECK(THPStreamClass != nullptr, "import torch before torch_npu._C");

  PyTypeObject& st = NPUStreamType;
  st.tp_name = "torch_npu._C._NPUStreamBase";
  st.tp_basicsize = sizeof(NPUStreamObject);  // the triple + the handle cache
  st.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  st.tp_doc = "C base of torch_npu.npu.Stream: a torch.Stream of the npu device.";
  st.tp_richcompare = streamRichCompare;
  st.tp_hash = streamHash;
  st.tp_methods = streamMethods;
  st.tp_members = streamMembers;
  st.tp_getset = streamGetSet;
  st.tp_new = streamNew;
  readyType(&st, THPStreamClass, m.ptr(), "_NPUStreamBase");

  if (PyModule_AddFunctions(m.ptr(), moduleMethods) < 0) throw python_error();

  m.def("_npu_registerStreamClass", [](py::handle cls) {
    TORCH_CHECK_TYPE(PyType_Check(cls.ptr()) &&
                         PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), &NPUStreamType),
                     "expected a subclass of torch_npu._C._NPUStreamBase");
    Py_INCREF(cls.ptr());  // kept for the life of the process
    gStreamClass = reinterpret_cast<PyTypeObject*>(cls.ptr());
  });
  m.def("_npu_isExternalStream",
        [](py::handle s) { return streamArg(s.ptr(), "_npu_isExternalStream").isExternal(); });
  // The refusal of an API that needs a torch_npu-managed stream (compat mode),
  // for the Python-level graph/report APIs. current=True words it for a check
  // of the current stream, as torch_npu does.
  m.def("_npu_checkManagedOnly", [](py::handle s, const std::string& api, bool current) {
    const NPUStream stream = streamArgOrCurrent(s.ptr(), api.c_str());
    if (!stream.isExternal() || external::mode() == external::Mode::kFull) return;
    TORCH_CHECK(!current, "External NPU stream is not supported in ", api,
                ". This path requires a torch_npu-managed current stream.", NPU_ERROR_SUFFIX);
    external::checkManagedOnly(stream, api.c_str());
  });
  m.def("_npu_setStreamLimit", [](py::handle s, int kind, int64_t value) {
    limits::setStreamLimit(streamArg(s.ptr(), "set_stream_limit"),
                           static_cast<limits::Kind>(kind), value);
  });
  m.def("_npu_getStreamLimit", [](py::handle s, int kind) {
    return limits::getStreamLimit(streamArg(s.ptr(), "get_stream_limit"),
                                  static_cast<limits::Kind>(kind));
  });
  m.def("_npu_resetStreamLimit", [](py::handle s) {
    limits::resetStreamLimit(streamArg(s.ptr(), "reset_stream_limit"));
  });
  // torch_npu's names: type 0 = cube, 1 = vector (set_device_limit).
  m.def("_npu_set_device_res_limit", [](int64_t device, int type, int64_t value) {
    TORCH_CHECK(type == 0 || type == 1, "Expected a limit type 0 (cube) or 1 (vector), but got ",
                type, NPU_ERROR_SUFFIX);
    limits::setDeviceLimit(checkedDeviceIndex(device), static_cast<limits::Kind>(type), value);
  });
  m.def("_npu_get_device_res_limit", [](int64_t device, int type) {
    TORCH_CHECK(type == 0 || type == 1, "Expected a limit type 0 (cube) or 1 (vector), but got ",
                type, NPU_ERROR_SUFFIX);
    return limits::getDeviceLimit(checkedDeviceIndex(device), static_cast<limits::Kind>(type));
  });
  m.def("_npu_streamIntraOpThreads",
        [](py::handle s) { return limits::intraOpThreads(streamArg(s.ptr(), "intra_op_threads")); });
  m.def("_npu_externalEventPendingGates", [](int64_t device) {
    return NPUExternalEvent::pendingGates(checkedDeviceIndex(device));
  });
}

}  // namespace c10_npu::python
