"""The C++ SDK inside the package: torch_npu.utils.cpp_extension.NpuExtension,
torch_npu's header layout, -ltorch_npu, and ACL streams as ExternalStreams.

The full check of an installed wheel in a fresh environment is
``make test-packaging`` (scripts/test_packaging.sh); these run against the
package under test (the in-tree build in ``make test``).
"""

import ctypes
import os
import subprocess
import sysconfig
import textwrap

import pytest
import torch

import torch_npu
from torch_npu.utils import cpp_extension

PKG = os.path.dirname(os.path.abspath(torch_npu.__file__))


def load_acl() -> ctypes.CDLL:
    acl = ctypes.CDLL(os.path.join(PKG, "lib", "libascendcl.so"))
    acl.aclrtCreateStream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    for name in ("aclrtSynchronizeStream", "aclrtDestroyStream"):
        getattr(acl, name).argtypes = [ctypes.c_void_p]
    acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
    return acl


def test_version_says_what_it_is():
    assert torch_npu.__version__.startswith("0.1.0+sim")
    assert isinstance(torch_npu.version.git_version, str)


def test_npu_extension_adds_package_paths_and_libraries():
    ext = cpp_extension.NpuExtension("m", ["m.cpp"], include_dirs=["mine"], libraries=["z"])
    include = os.path.join(PKG, "include")
    assert ext.include_dirs[:3] == ["mine", include, os.path.join(include, "third_party", "acl", "inc")]
    assert os.path.join(PKG, "lib") in ext.library_dirs
    assert ext.libraries == ["z", "c10", "torch", "torch_cpu", "torch_python", "torch_npu"]
    assert ext.language == "c++"
    for header in ("torch_npu/csrc/core/npu/NPUStream.h", "torch_npu/csrc/core/npu/NPUEvent.h",
                   "torch_npu/csrc/core/npu/NPUGraph.h", "torch_npu/csrc/core/npu/NPUCachingAllocator.h",
                   "torch_npu/csrc/core/npu/NPUFunctions.h", "torch_npu/csrc/core/npu/NPUGraphsUtils.h",
                   "npurt/npurt.h",
                   "third_party/acl/inc/acl/acl.h", "third_party/acl/inc/acl/acl_rt.h"):
        assert os.path.isfile(os.path.join(include, header)), header


def test_npu_extension_without_headers_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr(cpp_extension, "PYTORCH_NPU_INSTALL_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"has no C\+\+ headers .* build the package first"):
        cpp_extension.NpuExtension("m", ["m.cpp"])


def test_acl_stream_is_an_external_stream():
    acl = load_acl()
    stream = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    try:
        ext = torch_npu.npu.ExternalStream(stream.value)
        assert ext.npu_stream == stream.value
        x = torch.arange(8, dtype=torch.float32, device="npu")
        torch_npu.npu.synchronize()
        with torch_npu.npu.stream(ext):
            y = x * 3
        # npu_stream drains the task queue; then ACL synchronizes the stream.
        assert acl.aclrtSynchronizeStream(ext.npu_stream) == 0
        assert y.cpu().tolist() == [3.0 * i for i in range(8)]
    finally:
        torch_npu.npu.synchronize()
        assert acl.aclrtDestroyStream(stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 107017  # ACL_ERROR_RT_INVALID_HANDLE
    assert b"npuErrorInvalidResourceHandle" in acl.aclGetRecentErrMsg()


PROBE = textwrap.dedent(
    r"""
    // Compiled with NpuExtension's flags: torch_npu's header layout and ACL.
    #include "torch_npu/csrc/core/npu/NPUStream.h"
    #include "acl/acl.h"

    extern "C" int probe() {
      aclrtStream raw = nullptr;
      if (aclrtCreateStream(&raw) != ACL_ERROR_NONE) return 1;
      c10_npu::NPUStream s = c10_npu::getStreamFromExternal(raw, 0);
      int status = 0;
      if ((s.id() & (int64_t{1} << 30)) == 0) status = 2;
      if (s.stream() != raw) status = 3;
      if (c10_npu::getStreamFromExternal(raw, 0).id() != s.id()) status = 4;
      if ((c10_npu::getNPUStreamFromPool(0).id() & (int64_t{1} << 30)) != 0) status = 5;
      if (aclrtDestroyStream(raw) != ACL_ERROR_NONE) status = 6;
      return status;
    }
    """
)


def test_code_written_for_torch_npu_links_against_the_package(tmp_path):
    ext = cpp_extension.NpuExtension("probe", ["probe.cpp"])
    (tmp_path / "probe.cpp").write_text(PROBE)
    out = tmp_path / "libprobe.so"
    command = ["g++", "-std=c++17", "-shared", "-fPIC", "-O0", str(tmp_path / "probe.cpp"), "-o", str(out)]
    command += [f"-I{d}" for d in ext.include_dirs] + [f"-I{sysconfig.get_paths()['include']}"]
    command += [f"-L{d}" for d in ext.library_dirs] + [f"-l{lib}" for lib in ext.libraries]
    subprocess.run(command, check=True)
    needed = subprocess.run(["readelf", "-d", str(out)], check=True, capture_output=True, text=True).stdout
    assert "libnpu_core.so" in needed and "libascendcl.so" in needed  # through -ltorch_npu
    assert ctypes.CDLL(str(out)).probe() == 0
