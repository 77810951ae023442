"""Graph replay against eager launch of the same 100-op step, side by side.

Run with ``make bench`` (or ``PYTHONPATH=. .venv/bin/python benchmarks/bench_graphs.py``).

The step: 100 small in-place elementwise ops (alternating ``mul_`` and
``add_`` on a 256-element float tensor), the shape of an inference step made
of many tiny kernels, where launch overhead dominates. Measured per step, as
the median of several repetitions of ``STEPS`` steps each:
  * host time: what the calling thread spends issuing one step (eager: 100 op
    launches through the task queue; graph: one ``replay()``);
  * host+device time: issuing ``STEPS`` steps and synchronizing, divided by
    ``STEPS`` (the device work included).
A third column replays the same step captured inside one super-kernel scope
(one device task per replay instead of 100 nodes).
Target (issue 11): replay host+device time <= 0.3x eager (goal 0.1x).

Then the same 100 ops as a function compiled by ``torch.compile``: with
``backend="aot_eager"`` (the ops run one by one) against
``backend="npugraphs"`` (the compiled graph replayed as an NPU graph, Note
[Compiled functions replayed as NPU graphs]), per call, the function's
argument and result included.
"""

import statistics
import time
from typing import Callable, Tuple

import torch

import torch_npu  # noqa: F401

OPS = 100
STEPS = 50
REPEATS = 7


def step(x: torch.Tensor) -> None:
    for i in range(OPS // 2):
        x.mul_(1.0001)
        x.add_(0.5 if i % 2 else -0.5)


def functional_step(x: torch.Tensor) -> torch.Tensor:
    for i in range(OPS // 2):
        x = x * 1.0001
        x = x + (0.5 if i % 2 else -0.5)
    return x


def measure(run_step: Callable[[], None]) -> Tuple[float, float]:
    """(host us per step, host+device us per step), medians."""
    host, total = [], []
    for _ in range(REPEATS):
        torch.npu.synchronize()
        t0 = time.perf_counter()
        issued = 0.0
        for _ in range(STEPS):
            s0 = time.perf_counter()
            run_step()
            issued += time.perf_counter() - s0
        torch.npu.synchronize()
        total.append((time.perf_counter() - t0) / STEPS * 1e6)
        host.append(issued / STEPS * 1e6)
    return statistics.median(host), statistics.median(total)


def main() -> None:
    x = torch.ones(256, device="npu")
    for _ in range(5):  # warm-up: metadata caches, executor threads
        step(x)
    torch.npu.synchronize()
    eager_host, eager_total = measure(lambda: step(x))

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        step(x)
    g.replay()
    torch.npu.synchronize()
    graph_host, graph_total = measure(g.replay)

    # The same step inside one super-kernel scope: one device task per replay.
    fused = torch.npu.NPUGraph()
    with torch.npu.graph(fused):
        torch.npu.super_kernel_scope_begin("step")
        step(x)
        torch.npu.super_kernel_scope_end("step")
    fused.replay()
    torch.npu.synchronize()
    fused_host, fused_total = measure(fused.replay)

    print(f"graph replay vs eager, one step of {OPS} ops on 256 floats (median of {REPEATS} x {STEPS} steps)")
    print(f"{'':22}{'eager':>10}{'replay':>10}{'/eager':>8}{'fused':>10}{'/eager':>8}")
    for label, e, r, f in (("host us/step", eager_host, graph_host, fused_host),
                           ("host+device us/step", eager_total, graph_total, fused_total)):
        print(f"{label:22}{e:10.1f}{r:10.1f}{r / e:8.3f}{f:10.1f}{f / e:8.3f}")

    compiled = {}
    for backend in ("aot_eager", "npugraphs"):
        fn = torch.compile(functional_step, backend=backend)
        for _ in range(3):  # compile; npugraphs: warm-up, record
            fn(x)
        compiled[backend] = measure(lambda: fn(x))
    (ae_host, ae_total), (ng_host, ng_total) = compiled["aot_eager"], compiled["npugraphs"]
    print(f"\ntorch.compile, the same {OPS} ops as a function (median of {REPEATS} x {STEPS} calls)")
    print(f"{'':22}{'aot_eager':>10}{'npugraphs':>10}{'/aot':>8}")
    for label, a, n in (("host us/call", ae_host, ng_host), ("host+device us/call", ae_total, ng_total)):
        print(f"{label:22}{a:10.1f}{n:10.1f}{n / a:8.3f}")


if __name__ == "__main__":
    main()
