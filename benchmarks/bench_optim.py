"""Optimizer step time: torch_npu's fused optimizers beside torch.optim's, on the same model.

Measures, in one run on device 0, the time of `step()` (queued and finished:
each timing ends with a synchronize) for a model of many small parameters,
where the fused optimizers' few ops over combined buffers should win over
per-parameter ops:
  NpuFusedAdam / NpuFusedSGD(momentum)     vs torch.optim.Adam / SGD (foreach and for-loop)
and the number of ops each queues per step (the profiler's npu rows are not
needed: the ops are counted with a dispatch mode).

Run: python benchmarks/bench_optim.py [--params N] [--repeat N]
"""

import argparse
import os
import sys
import time
from typing import Callable, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import torch_npu  # noqa: E402
from torch_npu.optim import NpuFusedAdam, NpuFusedSGD  # noqa: E402


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.count += 1
        return func(*args, **(kwargs or {}))


def _params(count: int) -> List[torch.nn.Parameter]:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(64, 64, device="npu")) for _ in range(count)]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


def _time_steps(make: Callable[[List[torch.nn.Parameter]], torch.optim.Optimizer], count: int,
                steps: int, repeat: int) -> tuple:
    opt = make(_params(count))
    opt.step()  # combines (fused) / creates the states
    torch.npu.synchronize()
    counter = _CountOps()
    with counter:
        opt.step()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(steps):
            opt.step()
        torch.npu.synchronize()
        best = min(best, (time.perf_counter() - start) / steps)
    return best * 1e3, counter.count


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=100, help="parameters of 64x64 floats")
    parser.add_argument("--steps", type=int, default=10, help="steps per timing run")
    parser.add_argument("--repeat", type=int, default=3, help="timing runs (best is reported)")
    args = parser.parse_args(argv)
    torch.npu.set_device(0)
    cases = [
        ("NpuFusedAdam", lambda p: NpuFusedAdam(p, lr=1e-3)),
        ("torch.optim.Adam(foreach=True)", lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True)),
        ("torch.optim.Adam(foreach=False)", lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False)),
        ("NpuFusedSGD(momentum=0.9)", lambda p: NpuFusedSGD(p, lr=1e-3, momentum=0.9)),
        ("torch.optim.SGD(momentum=0.9, foreach=True)",
         lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True)),
        ("torch.optim.SGD(momentum=0.9, foreach=False)",
         lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=False)),
    ]
    print(f"step() of {args.params} parameters of 64x64 floats (best of {args.repeat} x {args.steps} steps)")
    print(f"{'optimizer':48s} {'ms/step':>9s} {'ops/step':>9s}")
    for name, make in cases:
        ms, ops = _time_steps(make, args.params, args.steps, args.repeat)
        print(f"{name:48s} {ms:9.2f} {ops:9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
