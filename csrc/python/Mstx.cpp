// torch_npu._C._mstx: the markers and ranges of torch_npu.npu.mstx. Layer:
// binding; the semantics are Note [Markers on the simulator] in
// csrc/profiler/Mstx.h. Streams arrive as torch_npu's (id, device index,
// device type) triple and are validated by unpack3.
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "core/NPUStream.h"
#include "profiler/Mstx.h"
#include "python/Init.h"

namespace py = pybind11;

namespace c10_npu::python {

void initMstx(py::module_& m) {
  py::module_ mstx = m.def_submodule("_mstx", "torch_npu.npu.mstx's markers and ranges");
  const auto stream = [](int64_t id, int64_t device, int64_t type) {
    return NPUStream::unpack3(id, static_cast<c10::DeviceIndex>(device),
                              static_cast<c10::DeviceType>(type));
  };
  mstx.def("_mark_on_host", [](const std::string& message, const std::string& domain) {
    py::gil_scoped_release noGil;
    mstx::mark(message, nullptr, domain);
  });
  mstx.def("_mark", [stream](const std::string& message, int64_t id, int64_t device, int64_t type,
                             const std::string& domain) {
    const NPUStream s = stream(id, device, type);
    py::gil_scoped_release noGil;
    mstx::mark(message, &s, domain);
  });
  mstx.def("_range_start_on_host", [](const std::string& message, const std::string& domain) {
    py::gil_scoped_release noGil;
    return mstx::rangeStart(message, nullptr, domain);
  });
  mstx.def("_range_start", [stream](const std::string& message, int64_t id, int64_t device,
                                    int64_t type, const std::string& domain) {
    const NPUStream s = stream(id, device, type);
    py::gil_scoped_release noGil;
    return mstx::rangeStart(message, &s, domain);
  });
  mstx.def("_range_end", [](uint64_t rangeId, const std::string& domain) {
    py::gil_scoped_release noGil;
    mstx::rangeEnd(rangeId, domain);
  });
  mstx.def("_range_push_on_host", [](const std::string& message, const std::string& domain) {
    py::gil_scoped_release noGil;
    return mstx::rangePush(message, nullptr, domain);
  });
  mstx.def("_range_push", [stream](const std::string& message, int64_t id, int64_t device,
                                   int64_t type, const std::string& domain) {
    const NPUStream s = stream(id, device, type);
    py::gil_scoped_release noGil;
    return mstx::rangePush(message, &s, domain);
  });
  mstx.def("_range_pop", [](const std::string& domain) {
    py::gil_scoped_release noGil;
    return mstx::rangePop(domain);
  });
}

}  // namespace c10_npu::python
