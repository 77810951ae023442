"""The device race detector (NPU_SIM_RACECHECK; docs/DEBUGGING.md, "Device race
detector") seen from PyTorch: it flags a PyTorch op and a third-party kernel
(examples/interop's library, which declares its kernels' memory) that touch the
same tensor from two streams with nothing ordering them — a race no
dispatch-level sanitizer can see, because the library's kernel never passes
through PyTorch — and stays quiet when the two are ordered by a host
synchronize, an event wait or a wait_stream, and on the interop example.

Each case runs in a fresh interpreter: the detector is switched at start.
"""

from __future__ import annotations

import os

import pytest

from conftest import REPO_ROOT, run_py

pytestmark = pytest.mark.subprocess

LIB = os.path.join(REPO_ROOT, "build", "examples", "interop", "libnpu_thirdparty.so")

PRELUDE = f"""
import ctypes
import torch
import torch_npu

lib = ctypes.CDLL({LIB!r})
lib.tp_create_stream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
lib.tp_scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
lib.tp_scale.restype = ctypes.c_int
handle = ctypes.c_void_p()
assert lib.tp_create_stream(ctypes.byref(handle)) == 0
npurt = ctypes.CDLL(next(l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith("libnpurt.so")))
def reports():
    n = ctypes.c_uint64()
    assert npurt.npuRaceCheckGetReportCount(ctypes.byref(n)) == 0
    return n.value
n = 1 << 16
x = torch.ones(n, device="npu")
torch.npu.synchronize()
"""

RACECHECK = {"NPU_SIM_RACECHECK": "1", "NPU_SIM_TASK_DELAY_US": "2000"}


def _need_library() -> None:
    if not os.path.exists(LIB):
        pytest.skip("examples not built (build/examples/interop/libnpu_thirdparty.so missing)")


def test_pytorch_op_and_foreign_kernel_on_another_stream_race() -> None:
    _need_library()
    p = run_py(
        PRELUDE
        + """
y = x * 2                                            # PyTorch, default stream
assert lib.tp_scale(handle, y.data_ptr(), n, 3.0) == 0  # library, its own stream: no wait
try:
    torch.npu.synchronize()
except RuntimeError as e:
    print("RAISED", e)
print("REPORTS", reports())
""",
        RACECHECK,
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "RAISED" in out and "data race" in out, out
    # An ACL host function has no name of its own: npurt names it after the
    # call that launched it.
    assert "'aten::mul'" in out and "'npuLaunchHostFunc'" in out, out
    assert "REPORTS 1" in out, out


@pytest.mark.parametrize(
    "order",
    [
        "torch.npu.synchronize()",
        "torch.npu.current_stream().synchronize()",
        "ev = torch.npu.Event(); ev.record(); ev.synchronize()",
    ],
)
def test_host_synchronization_orders_the_foreign_kernel(order: str) -> None:
    _need_library()
    p = run_py(
        PRELUDE
        + f"""
y = x * 2
{order}
assert lib.tp_scale(handle, y.data_ptr(), n, 3.0) == 0
torch_npu.npu.set_external_stream_mode("full")
ext = torch_npu.npu.ExternalStream(handle.value)
ext.synchronize()
assert torch.equal(y.cpu(), torch.full((n,), 6.0)), y.cpu()[:4]
print("REPORTS", reports())
""",
        RACECHECK,
    )
    assert p.returncode == 0, p.stderr
    assert "REPORTS 0" in p.stdout, p.stdout + p.stderr


def test_pytorch_op_on_the_external_stream_after_wait_stream_is_quiet() -> None:
    _need_library()
    p = run_py(
        PRELUDE
        + """
torch_npu.npu.set_external_stream_mode("full")
ext = torch_npu.npu.ExternalStream(handle.value)
y = x * 2                                   # default stream
ext.wait_stream(torch.npu.current_stream())  # an event wait on the library's stream
assert lib.tp_scale(ext.npu_stream, y.data_ptr(), n, 3.0) == 0
with torch.npu.stream(ext):
    z = y + 1                               # PyTorch op on the external stream: stream order
torch.npu.current_stream().wait_stream(ext)
w = z * 2                                   # back on the default stream
assert torch.equal(w.cpu(), torch.full((n,), 14.0))
print("REPORTS", reports())
""",
        RACECHECK,
    )
    assert p.returncode == 0, p.stderr
    assert "REPORTS 0" in p.stdout, p.stdout + p.stderr


def test_missing_wait_stream_between_two_pytorch_streams_is_flagged() -> None:
    p = run_py(
        """
import torch, torch_npu
s = torch.npu.Stream()
x = torch.ones(1 << 16, device="npu")
torch.npu.synchronize()
y = x * 2
with torch.npu.stream(s):
    y.add_(1)        # no s.wait_stream(current): races with x * 2
try:
    torch.npu.synchronize()
    print("NO ERROR")
except RuntimeError as e:
    print("RAISED", e)
""",
        RACECHECK,
    )
    assert p.returncode == 0, p.stderr
    assert "RAISED" in p.stdout and "data race" in p.stdout, p.stdout
    assert "'aten::mul'" in p.stdout and "'aten::add_'" in p.stdout, p.stdout


def test_memory_reused_across_streams_through_the_allocator_is_quiet() -> None:
    p = run_py(
        """
import torch, torch_npu
s = torch.npu.Stream()
for i in range(20):
    with torch.npu.stream(s):
        a = torch.ones(1 << 14, device="npu") * i   # allocated and used on s
    torch.npu.current_stream().wait_stream(s)
    b = a + 1                                      # used on the default stream
    a.record_stream(torch.npu.current_stream())
    del a, b                                       # freed while work is queued
    c = torch.zeros(1 << 14, device="npu")         # may reuse the blocks
    torch.npu.synchronize()
print("OK")
""",
        RACECHECK,
    )
    assert p.returncode == 0, p.stderr
    assert "OK" in p.stdout, p.stdout


def test_interop_example_is_quiet() -> None:
    """Once built (`make demo`); `make test-packaging` runs it with the detector on in CI."""
    _need_library()
    import glob
    if not glob.glob(os.path.join(REPO_ROOT, "examples", "interop", "npu_interop*.so")):
        pytest.skip("examples/interop is not built (make demo builds it; make test-packaging "
                    "runs it with NPU_SIM_RACECHECK=1)")
    script = os.path.join(REPO_ROOT, "examples", "interop", "interop.py")
    p = run_py(open(script).read().replace("__file__", repr(script)), {"NPU_SIM_RACECHECK": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "npurt:" not in p.stderr, p.stderr


def test_bad_mode_is_a_clear_initialization_error() -> None:
    p = run_py("import torch, torch_npu\ntorch.ones(1, device='npu')", {"NPU_SIM_RACECHECK": "on"})
    assert p.returncode != 0
    assert "NPU_SIM_RACECHECK must be 0 (or off), 1 (or error), log or abort, got 'on'" in p.stderr, p.stderr
