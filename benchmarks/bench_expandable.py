"""Expandable segments against ordinary segments (Note [Expandable segments]),
side by side in one run, in one interpreter (the option is switched with
torch.npu.memory._set_allocator_settings, the cache emptied in between).

Workloads:
  growing batch   40 steps; step n allocates six tensors of n/2, n, 3n/2 MiB
                  (n = 40..79, the batch drifting up by one), then frees them:
                  peak reserved memory, device allocations (npuMalloc or map
                  calls), wall time
  steady          2000 x (allocate 64 MiB, free): cached reuse, per iteration
  first touch     allocate and free 1 GiB in 64 MiB pieces after empty_cache:
                  the cost of getting memory from the runtime (npuMalloc vs
                  npuMemCreate + npuMemMap), per piece

Run: python benchmarks/bench_expandable.py
"""

import time
from typing import Dict, Tuple

import torch
import torch_npu  # noqa: F401  (registers the npu device)

MiB = 1 << 20


def _stats() -> Dict[str, int]:
    return torch.npu.memory_stats()


def growing_batch() -> Tuple[int, int, float]:
    """Peak reserved MiB, device allocations, milliseconds."""
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    before = _stats()["num_device_alloc"]
    start = time.perf_counter()
    for n in range(40, 80):
        xs = [torch.empty(n * MiB // 2 * (1 + k % 3), dtype=torch.uint8, device="npu")
              for k in range(6)]
        del xs
    elapsed = (time.perf_counter() - start) * 1e3
    s = _stats()
    return s["reserved_bytes.all.peak"] // MiB, s["num_device_alloc"] - before, elapsed


def steady(iters: int = 2000) -> float:
    """Microseconds per allocate + free of a cached 64 MiB block."""
    torch.npu.empty_cache()
    torch.empty(64 * MiB, dtype=torch.uint8, device="npu")  # warm the cache
    start = time.perf_counter()
    for _ in range(iters):
        torch.empty(64 * MiB, dtype=torch.uint8, device="npu")
    return (time.perf_counter() - start) / iters * 1e6


def first_touch(pieces: int = 16) -> float:
    """Microseconds per 64 MiB piece taken from the runtime."""
    total = 0.0
    for _ in range(5):
        torch.npu.empty_cache()
        start = time.perf_counter()
        xs = [torch.empty(64 * MiB, dtype=torch.uint8, device="npu") for _ in range(pieces)]
        total += time.perf_counter() - start
        del xs
    return total / (5 * pieces) * 1e6


def main() -> None:
    rows = {}
    for mode in ("False", "True"):
        torch.npu.memory._set_allocator_settings(f"expandable_segments:{mode}")
        torch.npu.empty_cache()
        rows[mode] = (growing_batch(), steady(), first_touch())
    torch.npu.memory._set_allocator_settings("expandable_segments:False")
    torch.npu.empty_cache()
    print(f"{'expandable_segments':<20} {'peak MiB':>9} {'dev allocs':>10} {'batch ms':>9} "
          f"{'steady us':>10} {'first touch us':>15}")
    for mode, ((peak, allocs, ms), steady_us, touch_us) in rows.items():
        print(f"{mode:<20} {peak:>9} {allocs:>10} {ms:>9.1f} {steady_us:>10.2f} {touch_us:>15.1f}")


if __name__ == "__main__":
    main()
