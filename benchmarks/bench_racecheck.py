"""Cost of npurt's device race detector for PyTorch work: the same workloads
with NPU_SIM_RACECHECK=0 and =1, side by side in one run.

Each configuration runs in its own interpreter (the detector is switched at
start); the two alternate, `--repeat` times each, and the table shows the
median per-iteration time of each and their ratio. Workloads:
  small ops  1000 x (y = x * 2; x.add_(y)) on 4096 floats, then synchronize
  mlp step   a 3-layer MLP (512 wide, batch 64): forward, backward, SGD step

Run: python benchmarks/bench_racecheck.py [--repeat N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = textwrap.dedent(
    """
    import json, time, torch, torch_npu

    def timed(fn, iters):
        fn(); torch.npu.synchronize()           # warm up
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.npu.synchronize()
        return (time.perf_counter() - start) / iters * 1e6

    x = torch.ones(4096, device="npu")
    def small_ops():
        for _ in range(1000):
            y = x * 2
            x.add_(y)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(64, 512, device="npu")
    target = torch.randint(0, 10, (64,), device="npu")
    def mlp_step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        opt.step()

    print(json.dumps({"small ops (1000 x 2 ops)": timed(small_ops, 3),
                      "mlp step": timed(mlp_step, 50)}))
    """
)


def run_child(mode: str) -> Dict[str, float]:
    env = dict(os.environ, NPU_SIM_RACECHECK=mode, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each configuration")
    args = parser.parse_args(argv)
    results: Dict[str, Dict[str, List[float]]] = {"0": {}, "1": {}}
    for _ in range(args.repeat):
        for mode in ("0", "1"):  # alternate: drift of the machine hits both alike
            for name, us in run_child(mode).items():
                results[mode].setdefault(name, []).append(us)
    print(f"{'workload':<28}{'off (us/iter)':>16}{'on (us/iter)':>16}{'on/off':>9}")
    for name in results["0"]:
        off = statistics.median(results["0"][name])
        on = statistics.median(results["1"][name])
        print(f"{name:<28}{off:>16.0f}{on:>16.0f}{on / off:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
