"""Checks an installed torch_npu (scripts/test_packaging.sh runs it in a fresh venv).

Run from a directory outside the source tree, without PYTHONPATH. Exits
non-zero with a message on the first failure.
"""

import ctypes
import os
import subprocess
import sys
import sysconfig
from typing import List

import torch

import torch_npu

SITE = os.path.realpath(sysconfig.get_paths()["purelib"])
PKG = os.path.dirname(os.path.realpath(torch_npu.__file__))

# Symbols the shipped headers promise (demangled prefixes), per library.
PROMISED = {
    "libnpu_core.so": [
        "c10_npu::getStreamFromExternal(",
        "c10_npu::getCurrentNPUStream(",
        "c10_npu::setCurrentNPUStream(",
        "c10_npu::getDefaultNPUStream(",
        "c10_npu::getStreamFromPool(",
        "c10_npu::NPUStream::stream() const",
        "c10_npu::NPUEvent::record(",
        "c10_npu::NPUEvent::block(",
        "c10_npu::NPUGraph::capture_begin(",
        "c10_npu::device_synchronize(",
    ],
    "libascendcl.so": [
        "aclInit", "aclrtCreateStream", "aclrtSynchronizeStream", "aclrtMemcpyAsync",
        "aclrtRecordEvent", "aclrtLaunchCallback", "aclrtProcessReport", "aclGetRecentErrMsg",
    ],
    "libnpurt.so": ["npuStreamCreate", "npuLaunchTask", "npuEventRecord"],
}


def fail(message: str) -> None:
    sys.exit(f"check_installed: FAILED: {message}")


def shared_objects() -> List[str]:
    found = []
    for dirpath, _, files in os.walk(PKG):
        found += [os.path.join(dirpath, f) for f in files if f.endswith(".so")]
    return found


def check_location() -> None:
    if not PKG.startswith(SITE + os.sep):
        fail(f"torch_npu imported from {PKG}, not from this environment's {SITE}")
    print(f"torch_npu {torch_npu.__version__} ({torch_npu.version.git_version[:9]}) from {PKG}")


def check_runpaths() -> None:
    for path in shared_objects():
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue  # libtorch_npu.so: a linker script
        dynamic = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
        for line in dynamic.splitlines():
            if "RUNPATH" in line or "RPATH" in line:
                entries = line.split("[", 1)[1].rstrip("]").split(":")
                bad = [e for e in entries if not e.startswith("$ORIGIN")]
                if bad:
                    fail(f"{os.path.relpath(path, PKG)} has RUNPATH entries outside the package: {bad}")
    print(f"RUNPATHs: all $ORIGIN-relative ({len(shared_objects())} shared objects)")


def check_symbols() -> None:
    for lib, symbols in PROMISED.items():
        path = os.path.join(PKG, "lib", lib)
        exported = subprocess.run(["nm", "-D", "--defined-only", "-C", path], check=True,
                                  capture_output=True, text=True).stdout
        names = [line.split(" ", 2)[2] for line in exported.splitlines() if line.count(" ") >= 2]
        missing = [s for s in symbols if not any(n.startswith(s) for n in names)]
        if missing:
            fail(f"{lib} does not export {missing}")
    print("exported symbols: every promised one is visible")


def check_loaded_from_package() -> None:
    with open("/proc/self/maps") as maps:
        ours = {line.split()[-1] for line in maps if line.rstrip().endswith(".so")
                and any(k in line for k in ("torch_npu", "npurt", "ascendcl", "npu_core", "npu_aten"))}
    outside = [p for p in ours if not os.path.realpath(p).startswith(PKG + os.sep)]
    if outside:
        fail(f"native libraries loaded from outside the package: {outside}")


def check_op_and_external_stream() -> None:
    x = torch.arange(6, dtype=torch.float32, device="npu")
    if (x * 2 + 1).sum().item() != 36.0:
        fail("(arange(6) * 2 + 1).sum() on npu is not 36")
    acl = ctypes.CDLL(os.path.join(PKG, "lib", "libascendcl.so"))
    stream = ctypes.c_void_p()
    if acl.aclrtCreateStream(ctypes.byref(stream)) != 0:
        fail("aclrtCreateStream failed")
    try:
        ext = torch_npu.npu.ExternalStream(stream.value)
        with torch_npu.npu.stream(ext):
            y = x + 10
        if acl.aclrtSynchronizeStream(ctypes.c_void_p(ext.npu_stream)) != 0:
            fail("aclrtSynchronizeStream of the ExternalStream failed")
        if y.cpu().tolist() != [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]:
            fail(f"x + 10 on the ExternalStream gave {y.cpu().tolist()}")
    finally:
        torch_npu.npu.synchronize()
        acl.aclrtDestroyStream(stream)
    print("an op, and ExternalStream over an ACL stream: OK")


def main() -> None:
    check_location()
    check_runpaths()
    check_symbols()
    check_op_and_external_stream()
    check_loaded_from_package()
    print("check_installed: OK")


if __name__ == "__main__":
    main()
