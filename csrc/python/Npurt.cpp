// torch_npu._C._npurt — a few npurt entry points for Python (what
// torch_npu.npu.npurt() returns), as torch_npu exposes its runtime's.
//
// Layer: binding. Arguments are plain integers (addresses, e.g.
// ctypes.addressof(c_void_p)); each function returns the npurt status as an
// int (0 = npuSuccess). A 0 address returns npuErrorInvalidValue without
// calling the runtime. The GIL is released around every runtime call. Every
// function is thread-safe (npurt's functions are).
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <string>

#include "npurt/npurt.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

// Ascend's aclrtHostRegister flags (ACL_HOST_REG_MAPPED, ACL_HOST_REG_PINNED).
// Simulated host memory is always "pinned and mapped", so torch_npu code that
// passes them works unchanged; npurt itself only accepts 0.
constexpr uint32_t kAclHostRegMapped = 0x2u;
constexpr uint32_t kAclHostRegPinned = 0x10000000u;

int hostRegister(uintptr_t ptr, size_t size, uint32_t flags) {
  if (ptr == 0 || size == 0) return static_cast<int>(npuErrorInvalidValue);
  const uint32_t rest = flags & ~(kAclHostRegMapped | kAclHostRegPinned);
  py::gil_scoped_release nogil;
  return static_cast<int>(npuHostRegister(reinterpret_cast<void*>(ptr), size, rest));
}

int hostUnregister(uintptr_t ptr) {
  if (ptr == 0) return static_cast<int>(npuErrorInvalidValue);
  py::gil_scoped_release nogil;
  return static_cast<int>(npuHostUnregister(reinterpret_cast<void*>(ptr)));
}

int streamCreate(uintptr_t handleAddress) {
  if (handleAddress == 0) return static_cast<int>(npuErrorInvalidValue);
  py::gil_scoped_release nogil;
  // Created on the calling thread's current device (torch_npu.npu.set_device).
  return static_cast<int>(npuStreamCreate(reinterpret_cast<npuStream_t*>(handleAddress)));
}

int streamDestroy(uintptr_t handle) {
  if (handle == 0) return static_cast<int>(npuErrorInvalidValue);
  py::gil_scoped_release nogil;
  return static_cast<int>(npuStreamDestroy(reinterpret_cast<npuStream_t>(handle)));
}

// An int as an npurt status. Converting an int outside the enum's range of
// values is undefined behaviour, so those become a value inside it that is no
// npurt code, which npurt names "unrecognized".
npuError_t toStatus(int64_t code) {
  constexpr int kNoSuchCode = npuErrorUnknown + 1;
  return static_cast<npuError_t>(code >= 0 && code <= npuErrorUnknown ? code : kNoSuchCode);
}

}  // namespace

void initNpurt(py::module_& m) {
  auto rt = m.def_submodule("_npurt", "npurt (simulated NPU runtime) API bindings");
  rt.def("npuHostRegister", &hostRegister, py::arg("ptr"), py::arg("size"), py::arg("flags"),
         "Register [ptr, ptr+size) as pinned host memory. Returns an npurt status.");
  rt.def("npuHostUnregister", &hostUnregister, py::arg("ptr"),
         "Unregister host memory registered with npuHostRegister. Returns an npurt status.");
  rt.def("npuStreamCreate", &streamCreate, py::arg("ptr"),
         "Create a runtime stream on the current device and store its handle at address ptr. "
         "Returns an npurt status.");
  rt.def("npuStreamDestroy", &streamDestroy, py::arg("stream"),
         "Destroy a runtime stream created with npuStreamCreate. Returns an npurt status.");
  rt.def(
      "npuGetErrorString", [](int64_t code) { return std::string(npuGetErrorString(toStatus(code))); },
      py::arg("error"), "The description of an npurt status (CUDA: cudaGetErrorString).");
  rt.def(
      "npuGetErrorName", [](int64_t code) { return std::string(npuGetErrorName(toStatus(code))); },
      py::arg("error"), "The enumerator name of an npurt status (CUDA: cudaGetErrorName).");
  rt.attr("npuSuccess") = static_cast<int>(npuSuccess);
  rt.attr("npuErrorInvalidValue") = static_cast<int>(npuErrorInvalidValue);
  rt.attr("npuErrorInvalidResourceHandle") = static_cast<int>(npuErrorInvalidResourceHandle);
}

}  // namespace c10_npu::python
