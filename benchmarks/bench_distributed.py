"""all_reduce bandwidth: the "hccl" backend on npu tensors vs gloo on CPU tensors.

Two ranks on this machine (loopback), one process group
``init_process_group("cpu:gloo,npu:hccl")``: CPU tensors go to gloo, npu
tensors to the hccl backend, whose transport is gloo over CPU aliases of the
device memory plus the stream ordering (docs/DISTRIBUTED.md). For each size
from 1 KiB to 64 MiB both are timed in the same run, interleaved (CPU, npu,
CPU, npu, ...), and the median of the rounds is reported as bus bandwidth
(bytes / time; with 2 ranks algorithm and bus bandwidth are equal).

An npu round is ``iters`` all_reduce calls followed by one
``torch.npu.synchronize()`` (the calls queue on the streams and return), a
CPU round ``iters`` blocking all_reduce calls.

Target (issue 14): npu >= 0.9x gloo-on-CPU at 64 MiB. ``--check`` exits 1 if
it is missed.

Run: python benchmarks/bench_distributed.py [--rounds N] [--check]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
TARGET = 0.9


def _iters(nbytes: int) -> int:
    # About 64 MiB moved per round, between 2 and 200 calls.
    return max(2, min(200, (64 << 20) // nbytes))


def _time_round(x: torch.Tensor, iters: int) -> float:
    dist.barrier(device_ids=[x.device.index] if x.is_npu else None)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    if x.is_npu:
        torch.npu.synchronize()
    return (time.perf_counter() - start) / iters


def _worker(rank: int, world: int, store: str, rounds: int, out: str) -> None:
    import torch_npu  # noqa: F401

    torch.npu.set_device(rank)
    dist.init_process_group("cpu:gloo,npu:hccl", init_method=f"file://{store}", rank=rank, world_size=world)
    results: Dict[int, Tuple[float, float]] = {}
    for nbytes in SIZES:
        n = nbytes // 4
        cpu = torch.ones(n)
        npu = torch.ones(n, device="npu")
        iters = _iters(nbytes)
        _time_round(cpu, 1), _time_round(npu, 1)  # warm up (connections, allocator)
        t_cpu: List[float] = []
        t_npu: List[float] = []
        for _ in range(rounds):
            t_cpu.append(_time_round(cpu, iters))
            t_npu.append(_time_round(npu, iters))
        results[nbytes] = (statistics.median(t_cpu), statistics.median(t_npu))
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def _human(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per size (median reported)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the 64 MiB target is missed")
    args = parser.parse_args(argv)
    os.environ.setdefault("NPU_SIM_DEVICE_COUNT", "2")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.pt")
        mp.spawn(_worker, args=(2, os.path.join(tmp, "store"), args.rounds, out), nprocs=2, join=True)
        results = torch.load(out)
    print(f"all_reduce, 2 ranks on {socket.gethostname()} ({os.cpu_count()} CPUs), loopback; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'size':>8} {'gloo cpu GB/s':>14} {'hccl npu GB/s':>14} {'npu/cpu':>8}")
    ratio = 0.0
    for nbytes in SIZES:
        t_cpu, t_npu = results[nbytes]
        ratio = t_cpu / t_npu
        print(f"{_human(nbytes):>8} {nbytes / t_cpu / 1e9:>14.3f} {nbytes / t_npu / 1e9:>14.3f} {ratio:>8.2f}")
    ok = ratio >= TARGET
    print(f"64 MiB: npu/cpu = {ratio:.2f} (target >= {TARGET}) {'ok' if ok else 'MISSED'}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
