// The Python module of the interop example (built by setup.py with
// torch_npu.utils.cpp_extension.NpuExtension against the installed
// torch_npu): the third-party library's functions, and a C++ round trip that
// shares an ACL stream with PyTorch the way torch_npu code does.
#include <torch/extension.h>

#include <c10/core/StreamGuard.h>

#include <cstdint>
#include <string>

#include "acl/acl.h"
#include "thirdparty.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace {

void check(aclError status, const char* what) {
  TORCH_CHECK(status == ACL_SUCCESS, what, " failed with ACL status ", status, ": ",
              aclGetRecentErrMsg());
}

aclrtStream asStream(uintptr_t value) { return reinterpret_cast<aclrtStream>(value); }

float* floatData(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.scalar_type() == at::kFloat &&
                  t.is_contiguous(),
              name, " must be a contiguous float32 npu tensor, but got ", t.toString(), " on ",
              t.device());
  return t.data_ptr<float>();
}

// Creates an ACL stream, makes it PyTorch's current stream through
// c10_npu::getStreamFromExternal, computes (arange(n) + 1) * 2 with torch ops
// on it, then the library scales the result by 3 on the same stream, and
// aclrtSynchronizeStream waits for all of it. Returns the result on the CPU.
at::Tensor torchOpsOnAclStream(int64_t n) {
  aclrtStream raw = nullptr;
  check(aclrtCreateStream(&raw), "aclrtCreateStream");
  at::Tensor result;
  try {
    const c10_npu::NPUStream ext = c10_npu::getStreamFromExternal(raw, 0);
    TORCH_CHECK(ext.stream() == raw, "getStreamFromExternal changed the stream");
    at::Tensor y;
    {
      c10::StreamGuard guard(ext.unwrap());
      TORCH_CHECK(c10_npu::getCurrentNPUStream(0) == ext, "the ACL stream is not current");
      y = (at::arange(n, at::TensorOptions().dtype(at::kFloat).device("npu:0")) + 1) * 2;
    }
    // Reading the stream handle drains PyTorch's task queue, so the library's
    // kernel is queued after the ops above (torch_npu's rule).
    check(tp_scale(ext.stream(), y.data_ptr<float>(), n, 3.0f), "tp_scale");
    check(aclrtSynchronizeStream(raw), "aclrtSynchronizeStream");
    result = y.cpu();
  } catch (...) {
    (void)aclrtDestroyStream(raw);
    throw;
  }
  check(aclrtDestroyStream(raw), "aclrtDestroyStream");
  return result;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "A third-party NPU library built against torch_npu (examples/interop)";
  m.def("create_stream", [] {
    aclrtStream s = nullptr;
    check(tp_create_stream(&s), "tp_create_stream");
    return reinterpret_cast<uintptr_t>(s);
  }, "Creates a stream of the library; returns its aclrtStream value.");
  m.def("destroy_stream", [](uintptr_t s) { check(tp_destroy_stream(asStream(s)), "tp_destroy_stream"); });
  m.def("scale", [](uintptr_t s, const at::Tensor& t, double alpha) {
    check(tp_scale(asStream(s), floatData(t, "t"), t.numel(), static_cast<float>(alpha)), "tp_scale");
  }, "t *= alpha on the stream (asynchronous).");
  m.def("add", [](uintptr_t s, const at::Tensor& dst, const at::Tensor& src) {
    TORCH_CHECK(dst.numel() == src.numel(), "add: dst has ", dst.numel(), " elements, src ", src.numel());
    check(tp_add(asStream(s), floatData(dst, "dst"), floatData(src, "src"), dst.numel()), "tp_add");
  }, "dst += src on the stream (asynchronous).");
  m.def("synchronize", [](uintptr_t s) {
    pybind11::gil_scoped_release noGil;
    check(tp_synchronize(asStream(s)), "tp_synchronize");
  });
  m.def("torch_ops_on_acl_stream", &torchOpsOnAclStream, pybind11::arg("n"),
        "(arange(n) + 1) * 2 * 3 computed by torch ops and the library on one ACL stream.");
}
