"""Per-call cost of the Python stream/event API, beside PyTorch's generic calls.

Measures, on the same device in the same run:
  current_stream()             vs torch.accelerator.current_stream()
  with torch_npu.npu.stream(s) vs with torch.Stream (generic context)
  ExternalStream(ptr)          vs torch.Stream(stream_id=..., ...) (rebuild)
  Event.record() + query()     vs torch.Event record() + query()

Prints a table with the targets (current_stream <= 1.5 us, stream context
enter+exit <= 3 us, ExternalStream(ptr) <= 3 us, and no slower than the
generic call) and exits non-zero if a target is missed when --check is given.

Run: python benchmarks/bench_streams.py [--repeat N] [--check]
"""

import argparse
import ctypes
import os
import sys
import timeit
from typing import Callable, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import torch_npu  # noqa: E402

npu = torch_npu.npu


def per_call_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best of `repeat` runs of `number` calls, in microseconds per call."""
    fn()  # warm up
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs (best is reported)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)

    npu.set_device(0)
    s = npu.Stream()
    g = torch.Stream(device="npu:0")
    rt = npu.npurt()
    handle = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(handle)) == 0
    ptr = handle.value
    npu.ExternalStream(ptr)  # registered once; later wraps find it
    sid, sidx, stype = s.stream_id, s.device_index, s.device_type
    ev, gev = npu.Event(), torch.Event(device="npu")

    def ctx_npu() -> None:
        with npu.stream(s):
            pass

    def ctx_generic() -> None:
        with g:
            pass

    def ev_npu() -> None:
        ev.record()
        ev.query()

    def ev_generic() -> None:
        gev.record()
        gev.query()

    rows: List[Tuple[str, Callable[[], object], str, Callable[[], object], Optional[float]]] = [
        ("current_stream()", npu.current_stream,
         "torch.accelerator.current_stream()", torch.accelerator.current_stream, 1.5),
        ("with npu.stream(s): enter+exit", ctx_npu, "with torch.Stream: enter+exit", ctx_generic, 3.0),
        ("ExternalStream(ptr)", lambda: npu.ExternalStream(ptr),
         "torch.Stream(stream_id=..)", lambda: torch.Stream(stream_id=sid, device_index=sidx, device_type=stype),
         3.0),
        ("Event.record()+query()", ev_npu, "torch.Event record()+query()", ev_generic, None),
    ]

    print(f"{'call':34} {'us/call':>8} {'target':>7}  {'generic call':36} {'us/call':>8}  verdict")
    missed = 0
    for name, fn, gname, gfn, target in rows:
        ours = per_call_us(fn, args.number, args.repeat)
        theirs = per_call_us(gfn, args.number, args.repeat)
        ok = (target is None or ours <= target) and ours <= theirs * 1.05
        missed += not ok
        tgt = f"{target:.1f}" if target is not None else "-"
        print(f"{name:34} {ours:8.3f} {tgt:>7}  {gname:36} {theirs:8.3f}  {'OK' if ok else 'MISSED'}")
    npu.synchronize()
    rt.npuStreamDestroy(ptr)
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
