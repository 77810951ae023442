"""PyTorch ops and a third-party library's kernels on one external stream.

The library (examples/interop/thirdparty.cpp, built as
build/examples/interop/libnpu_thirdparty.so) creates its own stream through
npurt and launches its own kernels on it. This script wraps that stream with
torch_npu.npu.ExternalStream, runs PyTorch ops on it interleaved with the
library's kernels, and checks the result:

- compat mode (torch_npu's behaviour): the stream cannot be synchronized
  through PyTorch, so the caller synchronizes the whole device;
- full mode: ``ext.synchronize()`` and events work on the external stream.

Ordering between the two producers: PyTorch ops go through the task queue,
the library calls npurt directly. Reading ``ext.npu_stream`` drains the task
queue, so passing ``ext.npu_stream`` (not a cached handle) to the library
puts its kernel after the PyTorch ops queued before. A per-task delay makes a
missing drain visible as a wrong result.

Run: ``python examples/interop/interop.py`` (after building the project).
"""

import ctypes
import os
import sys
from pathlib import Path

os.environ.setdefault("NPU_SIM_TASK_DELAY_US", "2000")  # make ordering bugs visible

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import torch_npu  # noqa: E402  (loads libnpurt first: the library shares it)


def load_library() -> ctypes.CDLL:
    candidates = [
        os.environ.get("NPU_THIRDPARTY_LIB", ""),
        str(ROOT / "build" / "examples" / "interop" / "libnpu_thirdparty.so"),
    ]
    for path in candidates:
        if path and os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        raise SystemExit("libnpu_thirdparty.so not found; build the project first (make build)")
    lib.tp_create_stream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.tp_destroy_stream.argtypes = [ctypes.c_void_p]
    lib.tp_scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
    lib.tp_add.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    for f in (lib.tp_create_stream, lib.tp_destroy_stream, lib.tp_scale, lib.tp_add):
        f.restype = ctypes.c_int
    return lib


def check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with npurt status {status}")


def run(lib: ctypes.CDLL, mode: str, n: int = 4096) -> None:
    npu = torch_npu.npu
    npu.set_external_stream_mode(mode)
    handle = ctypes.c_void_p()
    check(lib.tp_create_stream(ctypes.byref(handle)), "tp_create_stream")
    try:
        ext = npu.ExternalStream(handle.value)
        x = torch.arange(n, dtype=torch.float32, device="npu")
        npu.synchronize()  # x was made on the default stream
        with npu.stream(ext):
            y = x + 1  # PyTorch op on the library's stream
        # npu_stream drains the task queue: the library's kernel follows x + 1.
        check(lib.tp_scale(ext.npu_stream, y.data_ptr(), n, 2.0), "tp_scale")
        with npu.stream(ext):
            z = y * 3  # ... follows the library's scale
        check(lib.tp_add(ext.npu_stream, z.data_ptr(), x.data_ptr(), n), "tp_add")
        if mode == "compat":
            npu.synchronize()  # compat: the caller synchronizes the device
        else:
            ext.synchronize()  # full: stream-level synchronization works
        expected = (torch.arange(n, dtype=torch.float32) + 1) * 2 * 3 + torch.arange(n, dtype=torch.float32)
        got = z.cpu()
        if not torch.equal(got, expected):
            bad = (got != expected).nonzero().flatten()[:5].tolist()
            raise SystemExit(f"[{mode}] wrong result at {bad}: got {got[bad].tolist()}, expected {expected[bad].tolist()}")
        print(f"[{mode}] {n} elements: PyTorch ops and library kernels interleaved on {ext} -> OK")
    finally:
        npu.synchronize()
        check(lib.tp_destroy_stream(handle.value), "tp_destroy_stream")
        npu.set_external_stream_mode("compat")


def main() -> None:
    lib = load_library()
    run(lib, "compat")
    run(lib, "full")


if __name__ == "__main__":
    main()
