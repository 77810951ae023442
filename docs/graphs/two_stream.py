"""Renders docs/graphs/two_stream.png: a captured two-stream graph, from debug_dump.

Run: PYTHONPATH=. .venv/bin/python docs/graphs/two_stream.py (needs graphviz's dot).
"""

import os
import subprocess

import torch

import torch_npu  # noqa: F401

here = os.path.dirname(os.path.abspath(__file__))
x = torch.ones(64, device="npu")
a = torch.zeros(64, device="npu")
b = torch.zeros(64, device="npu")
side = torch.npu.Stream()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    main = torch.npu.current_stream()
    side.wait_stream(main)  # fork
    torch.mul(x, 2.0, out=a)
    with torch.npu.stream(side):
        torch.mul(x, 3.0, out=b)
        b.add_(1)
    main.wait_stream(side)  # join
    a.add_(b)
g.replay()
assert a.cpu().tolist() == [6.0] * 64
dot = os.path.join(here, "two_stream.dot")
g.debug_dump(dot)
subprocess.run(["dot", "-Tpng", dot, "-o", os.path.join(here, "two_stream.png")], check=True)
print("wrote", os.path.join(here, "two_stream.png"))
