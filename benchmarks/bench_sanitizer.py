"""What the trace hooks and the stream sanitizer cost, in one run.

Run with ``make bench`` (or ``PYTHONPATH=. .venv/bin/python benchmarks/bench_sanitizer.py``).

Three phases, in this order, in one process (PyTorch's GPU trace cannot be
turned off again once on, so the order is fixed):

1. ``never``: nothing ever activated PyTorch's GPU trace; each hook is one
   plain load (``GPUTrace::haveState``).
2. ``armed-off``: the GPU trace is active (as after ``import
   torch.cuda._sanitizer``) but the npu hooks are off; each hook is two loads.
3. ``sanitizer``: the stream sanitizer is enabled: every op goes through
   Python and every hook calls Python.

Measured per phase (the median of 5 repetitions): host time per tiny op
(``y = x + 1`` on 16 elements: one allocation, one free, one launch), and per
event round trip (``Event.record`` on the current stream and ``wait`` on
another: a creation, record, wait and deletion hook). The device work is
drained outside the timed region. Note [Trace hooks] in csrc/core/NPUTrace.h
says why phases 1 and 2 should be indistinguishable.
"""

import statistics
import time
from typing import Callable, Dict

import torch

import torch_npu
import torch_npu.npu._sanitizer as sanitizer


def _per_call_us(body: Callable[[], None], n: int) -> float:
    torch.npu.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        body()
    elapsed = time.perf_counter() - start
    torch.npu.synchronize()
    return elapsed / n * 1e6


def _measure(n: int) -> Dict[str, float]:
    x = torch.ones(16, device="npu")
    side = torch_npu.npu.Stream()

    def tiny_op() -> None:
        x + 1

    def event_round_trip() -> None:
        e = torch_npu.npu.Event()
        e.record()
        e.wait(side)

    _per_call_us(tiny_op, n // 10)  # warm-up: pools, metadata caches
    return {
        "tiny op (us)": statistics.median(_per_call_us(tiny_op, n) for _ in range(5)),
        "event round trip (us)": statistics.median(_per_call_us(event_round_trip, n) for _ in range(5)),
    }


def main() -> None:
    results = {"never": _measure(5000)}
    torch._C._activate_gpu_trace()
    assert not torch_npu._C._npu_isTraceActive()
    results["armed-off"] = _measure(5000)
    sanitizer.enable_npu_sanitizer()
    try:
        results["sanitizer"] = _measure(200)
    finally:
        sanitizer.npu_sanitizer.disable()
    rows = list(results["never"])
    print(f"{'phase':<12}" + "".join(f"{r:>24}" for r in rows))
    for phase, values in results.items():
        print(f"{phase:<12}" + "".join(f"{values[r]:>24.2f}" for r in rows))
    base = results["never"]
    for phase in ("armed-off", "sanitizer"):
        ratios = ", ".join(f"{r}: {results[phase][r] / base[r]:.2f}x" for r in rows)
        print(f"{phase} / never: {ratios}")


if __name__ == "__main__":
    main()
