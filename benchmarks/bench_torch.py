"""Benchmarks of ops on the npu device against the same ops on the cpu, in one run.

Run with ``make bench`` (or ``PYTHONPATH=. .venv/bin/python benchmarks/bench_torch.py``).

Measured (each the median of several repetitions):
  * host latency of ``y = x + 1`` on a 16-element tensor: time the calling
    thread spends per op (the npu op is only queued; the device catches up in
    the background and is drained outside the timed region);
  * wall time of 1,000 iterations of ``x = relu(x @ w)`` with 256x256 tensors,
    including the final synchronize on npu;
  * throughput of a 64 MiB elementwise add, including the synchronize.

Targets (issue "The npu device in PyTorch"): tiny-op host latency <= 2x cpu;
matmul chain wall time <= 1.1x cpu; 64 MiB add throughput >= 0.8x cpu.
"""

import statistics
import time
from typing import Callable, List, Tuple

import torch

import torch_npu  # noqa: F401


def _sync(device: str) -> None:
    if device == "npu":
        torch.npu.synchronize()


def _median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def tiny_op_latency_us(device: str, n: int = 5000) -> float:
    x = torch.randn(16, device=device)
    for _ in range(500):
        x + 1
    _sync(device)

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            x + 1
        t1 = time.perf_counter()
        _sync(device)
        return (t1 - t0) / n * 1e6

    return _median(run, 5)


def matmul_chain_s(device: str, iters: int = 1000) -> float:
    torch.manual_seed(0)
    w = (torch.randn(256, 256) / 16).to(device)
    x0 = torch.randn(256, 256).to(device)
    for _ in range(20):
        torch.relu(x0 @ w)
    _sync(device)

    def run() -> float:
        x = x0
        t0 = time.perf_counter()
        for _ in range(iters):
            x = torch.relu(x @ w)
        _sync(device)
        return time.perf_counter() - t0

    return _median(run, 3)


def big_add_gbps(device: str) -> float:
    n = 64 * 1024 * 1024 // 4
    a = torch.ones(n, device=device)
    b = torch.ones(n, device=device)
    out = torch.empty(n, device=device)
    torch.add(a, b, out=out)
    _sync(device)

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(10):
            torch.add(a, b, out=out)
        _sync(device)
        return 10 * 3 * n * 4 / (time.perf_counter() - t0) / 1e9

    return _median(run, 5)


def main() -> None:
    rows: List[Tuple[str, float, float, float, str, bool]] = []
    cpu, npu = tiny_op_latency_us("cpu"), tiny_op_latency_us("npu")
    rows.append(("x + 1, 16 elements: host us/op", cpu, npu, npu / cpu, "<= 2.0x", npu / cpu <= 2.0))
    cpu, npu = matmul_chain_s("cpu"), matmul_chain_s("npu")
    rows.append(("1000 x relu(x @ w), 256x256: s", cpu, npu, npu / cpu, "<= 1.1x", npu / cpu <= 1.1))
    cpu, npu = big_add_gbps("cpu"), big_add_gbps("npu")
    rows.append(("64 MiB add: GB/s (r+w)", cpu, npu, npu / cpu, ">= 0.8x", npu / cpu >= 0.8))

    print(f"\nnpu vs cpu (torch {torch.__version__}, {torch.get_num_threads()} intra-op threads)")
    print(f"{'benchmark':<36} {'cpu':>10} {'npu':>10} {'npu/cpu':>8}  {'target':<8} met")
    for name, c, n, ratio, target, met in rows:
        print(f"{name:<36} {c:>10.3f} {n:>10.3f} {ratio:>8.2f}  {target:<8} {'yes' if met else 'NO'}")


if __name__ == "__main__":
    main()
