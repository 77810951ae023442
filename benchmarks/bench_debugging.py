"""What the debugging tools cost, side by side in one run (docs/DEBUGGING.md).

Run with ``make bench`` (or ``PYTHONPATH=. .venv/bin/python benchmarks/bench_debugging.py``).

Measured, each the median of 7 repetitions with the modes interleaved (off,
history, profiler, off, ...) so that drift of a loaded machine spreads over all:
  * host latency of ``y = x + 1`` on a 16-element tensor (the time the calling
    thread spends per op; the device is drained outside the timed region);
  * wall time of 2,000 such ops including the final synchronize (the device's
    per-task cost shows here: the activity log records every task);
in three modes: nothing on; memory history on (``enabled="all"``,
``stacks="python"``: every allocation gathers a Python stack); inside a
``torch.profiler.profile`` with CPU and PrivateUse1 activities (every op is
a CPU event and a device activity). "Off" is the cost every program pays:
with neither tool on, an enqueue, a task and an allocation each test one
relaxed atomic flag.
"""

import contextlib
import statistics
import time
from typing import Callable, Dict, Iterator, List

import torch
from torch.profiler import ProfilerActivity, profile

import torch_npu
from torch_npu.npu import memory


@contextlib.contextmanager
def _off() -> Iterator[None]:
    yield


@contextlib.contextmanager
def _history() -> Iterator[None]:
    memory._record_memory_history(enabled="all", context="all", stacks="python",
                                  max_entries=100000, clear_history=True)
    try:
        yield
    finally:
        memory._record_memory_history(enabled=None, clear_history=True)


@contextlib.contextmanager
def _profiler() -> Iterator[None]:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        yield


MODES: Dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "off": _off, "memory history": _history, "profiler": _profiler}


def one_run(mode: str, n: int = 2000) -> Dict[str, float]:
    x = torch.randn(16, device="npu")
    torch.npu.synchronize()
    with MODES[mode]():
        t0 = time.perf_counter()
        for _ in range(n):
            x + 1
        t1 = time.perf_counter()
        torch.npu.synchronize()
        t2 = time.perf_counter()
    return {"host_us": (t1 - t0) / n * 1e6, "wall_ms": (t2 - t0) * 1e3}


def main() -> None:
    for mode in MODES:  # warm-up: first profile, first stack gathering
        one_run(mode, 200)
    results: Dict[str, List[Dict[str, float]]] = {m: [] for m in MODES}
    for _ in range(7):
        for mode in MODES:
            results[mode].append(one_run(mode))
    print(f"{'mode':<16} {'host us/op':>12} {'2000 ops + sync, ms':>22}")
    for mode, runs in results.items():
        host = statistics.median(r["host_us"] for r in runs)
        wall = statistics.median(r["wall_ms"] for r in runs)
        print(f"{mode:<16} {host:>12.2f} {wall:>22.1f}")


if __name__ == "__main__":
    main()
