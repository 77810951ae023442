"""torch_npu.contrib.transfer_to_npu: CUDA code runs on the npu.

It patches torch for the rest of the process, so every test runs in a fresh
interpreter."""

from conftest import run_py_ok

_PRELUDE = """
import warnings
import torch, torch_npu
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch_npu.contrib.transfer_to_npu
assert any("transfer_to_npu" in str(w.message) for w in caught)
"""


def test_cuda_code_runs_on_npu():
    out = run_py_ok(_PRELUDE + """
x = torch.randn(3, device="cuda")
y = torch.ones(2).cuda()
z = torch.zeros(2).to("cuda:1")
w = torch.tensor([1.0]).to(1)
m = torch.nn.Linear(2, 2).cuda()
print(x.device, y.device, z.device, w.device, next(m.parameters()).device, y.is_cuda)
print(torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.current_device())
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    a = torch.ones(4, device="cuda") * 3
torch.cuda.synchronize()
print(type(s).__module__, a.sum().item(), torch.cuda.memory_allocated(0) > 0, s.cuda_stream == s.npu_stream)
with torch.cuda.device(1):
    print(torch.cuda.current_device(), torch.empty(1, device="cuda").device)
g = torch.Generator("cuda")
e = torch.Event(device="cuda")
print(g.device, e.device, isinstance(torch.default_generator, torch.Generator))
with torch.device("cuda:1"):
    print(torch.zeros(1).device)
with torch.autocast("cuda"):
    print((x.reshape(1, 3) @ x.reshape(3, 1)).dtype)
print(torch.cuda.CUDAGraph is torch_npu.npu.NPUGraph, torch.distributed.is_nccl_available())
# torch.cuda's memory functions take cuda devices, and torch.cuda.device objects.
big = torch.ones(1024, device="cuda:1")
print(torch.cuda.memory_allocated("cuda:1") > 0, torch.cuda.memory_allocated(torch.cuda.device(1)) > 0,
      torch.cuda.get_device_name("cuda:1"))
try:
    torch.ones(1, device="cuda:7")  # a bad device still fails clearly, in npu terms
except RuntimeError as e:
    print(str(e).split(" [npu-sim")[0])
torch.cuda.memory._record_memory_history(device=torch.device("cuda:0"))
m = torch.ones(64, device="cuda")
snapshot = torch.cuda.memory._snapshot(device="cuda:0")
torch.cuda.memory._record_memory_history(enabled=None)
print(len(snapshot["device_traces"][0]) > 0, torch.distributed.ProcessGroupNCCL is torch_npu.distributed.ProcessGroupHCCL)
# Importing it again (under another name) patches nothing twice.
import importlib, sys
del sys.modules["torch_npu.contrib.transfer_to_npu"]
importlib.import_module("torch_npu.contrib.transfer_to_npu")
print(torch.randn(1, device="cuda").device)
""")
    assert out.splitlines() == [
        "npu:0 npu:0 npu:1 npu:1 npu:0 True",
        "True 2 0",
        "torch_npu.npu.streams 12.0 True True",
        "1 npu:1",
        "npu:0 npu True",
        "npu:1",
        "torch.float16",
        "True True",
        "True True NPU-SIM-1",
        "Invalid device_index: 7. Expected a device index in [0, 2) or -1.",
        "True True",
        "npu:0",
    ]


def test_amp_common_pinned_cache_profiler_kernel_and_cpp_extension_are_npus():
    out = run_py_ok(_PRELUDE + """
from torch.autograd.profiler_util import Kernel
print(torch.cuda.amp.common is torch_npu.npu.amp.common, torch.cuda.amp.common.amp_definitely_not_available())
# torch.cuda.graphs empties pinned memory through torch._C._host_emptyCache: npu's pinned cache.
p = torch.ones(1 << 20).pin_memory()
del p
before = torch_npu.npu.host_memory_stats()["allocated_bytes.current"]
torch._C._host_emptyCache()
print(before > 0, torch_npu.npu.host_memory_stats()["allocated_bytes.current"])
print(Kernel("cudaLaunchKernel", "cuda", 11), Kernel(name="k", device="cuda:1", duration=2).device)
paths = torch.utils.cpp_extension.include_paths(device_type="cuda")
print(paths == torch.utils.cpp_extension.include_paths("cpu"))
""")
    assert out.splitlines() == [
        "True False",
        "True 0",
        "Kernel(name='cudaLaunchKernel', device='npu', duration=11) npu:1",
        "True",
    ]
