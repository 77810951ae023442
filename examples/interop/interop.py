"""PyTorch ops and a third-party library's kernels on one ACL stream.

The library (thirdparty.cpp) is written against the ACL runtime API only: it
creates its own stream with ``aclrtCreateStream`` and launches its own
kernels on it. It is built with ``torch_npu.utils.cpp_extension.NpuExtension``
against the *installed* torch_npu (setup.py beside this file) into the module
``npu_interop``. This script

- wraps the library's stream with ``torch_npu.npu.ExternalStream`` and runs
  PyTorch ops on it interleaved with the library's kernels, in both external
  stream modes:

  - compat (torch_npu's behaviour): the stream cannot be synchronized through
    PyTorch, so the caller synchronizes through the library (ACL);
  - full: ``ext.synchronize()`` and events work on the external stream;

- runs the C++ round trip ``npu_interop.torch_ops_on_acl_stream``: an ACL
  stream wrapped with ``c10_npu::getStreamFromExternal``, torch ops on it,
  ``aclrtSynchronizeStream``.

Ordering between the two producers: PyTorch ops go through the task queue,
the library calls the runtime directly. Reading ``ext.npu_stream`` drains the
task queue, so passing ``ext.npu_stream`` (not a cached handle) to the
library puts its kernel after the PyTorch ops queued before. A per-task delay
makes a missing drain visible as a wrong result.

Run (after building torch_npu)::

    cd examples/interop && python setup.py build_ext --inplace && python interop.py
"""

import os

os.environ.setdefault("NPU_SIM_TASK_DELAY_US", "2000")  # make ordering bugs visible

import torch  # noqa: E402

import torch_npu  # noqa: E402  (loads the libraries the module links)

try:
    import npu_interop  # noqa: E402
except ImportError as e:  # pragma: no cover - a usage error, said clearly
    raise SystemExit(
        f"npu_interop is not built ({e}); run `python setup.py build_ext --inplace` in examples/interop"
    ) from e


def run(mode: str, n: int = 4096) -> None:
    """Interleaves PyTorch ops and the library's kernels on the library's stream."""
    npu = torch_npu.npu
    npu.set_external_stream_mode(mode)
    handle = npu_interop.create_stream()
    try:
        ext = npu.ExternalStream(handle)
        x = torch.arange(n, dtype=torch.float32, device="npu")
        npu.synchronize()  # x was made on the default stream
        with npu.stream(ext):
            y = x + 1  # PyTorch op on the library's stream
        # npu_stream drains the task queue: the library's kernel follows x + 1.
        npu_interop.scale(ext.npu_stream, y, 2.0)
        with npu.stream(ext):
            z = y * 3  # ... follows the library's scale
        npu_interop.add(ext.npu_stream, z, x)
        if mode == "compat":
            npu_interop.synchronize(ext.npu_stream)  # compat: synchronize through ACL
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
        npu_interop.destroy_stream(handle)
        npu.set_external_stream_mode("compat")


def run_cpp(n: int = 4096) -> None:
    """The C++ round trip: getStreamFromExternal on an ACL stream, torch ops, aclrtSynchronizeStream."""
    got = npu_interop.torch_ops_on_acl_stream(n)
    expected = (torch.arange(n, dtype=torch.float32) + 1) * 2 * 3
    if not torch.equal(got, expected):
        raise SystemExit(f"[c++] wrong result: got {got[:5].tolist()}..., expected {expected[:5].tolist()}...")
    print(f"[c++] {n} elements: torch ops on an ACL stream, aclrtSynchronizeStream -> OK")


def main() -> None:
    run("compat")
    run("full")
    run_cpp()


if __name__ == "__main__":
    main()
