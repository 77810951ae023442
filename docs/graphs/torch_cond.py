"""Renders docs/graphs/torch_cond.png: torch.cond captured as two if nodes, from debug_dump.

Run: PYTHONPATH=. .venv/bin/python docs/graphs/torch_cond.py (needs graphviz's dot).
"""

import os
import subprocess

import torch

import torch_npu  # noqa: F401
from torch_npu.npu._npugraph_conditional_nodes import NPUGraphCaptureControlFlowOpDispatchMode

here = os.path.dirname(os.path.abspath(__file__))
x = torch.ones(64, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g), NPUGraphCaptureControlFlowOpDispatchMode():
    out = torch.cond(x.sum() > 0, lambda t: t * 10, lambda t: t - 10, (x,))
g.replay()
assert out.cpu().tolist() == [10.0] * 64
x.fill_(-1.0)
g.replay()
assert out.cpu().tolist() == [-11.0] * 64
dot = os.path.join(here, "torch_cond.dot")
g.debug_dump(dot)
subprocess.run(["dot", "-Tpng", dot, "-o", os.path.join(here, "torch_cond.png")], check=True)
print("wrote", os.path.join(here, "torch_cond.png"))
