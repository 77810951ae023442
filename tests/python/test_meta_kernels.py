"""Output metadata from C++ (Note [C++ meta kernels] in csrc/aten/MetaFunctions.h).

Common ops on npu get their output metadata from PyTorch's C++ meta
functions, or from meta kernels of our own, instead of the Python meta
registrations that import torch._dynamo (and sympy) at their first call: the
first op of a process stays fast, and a program that never compiles never
pays for the compiler. These tests check that behaviour in fresh processes,
and that the C++ metadata is the CPU kernel's (shape, dtype and strides) and
the same as the Python meta kernels' (``NPU_CPP_META=0``).
"""

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import run_py_ok

_LAZY_MODULES = ("torch._dynamo", "sympy", "torch._inductor")

_COMMON_OPS = r"""
import sys
import torch
import torch_npu
import torch.nn.functional as F

x = torch.ones(4, device="npu")
assert (x + 1).sum().item() == 8.0
lin = torch.nn.Linear(8, 4).npu()
inp = torch.randn(3, 8, device="npu", requires_grad=True)
F.relu(lin(inp)).sum().backward()
torch.matmul(torch.randn(2, 3, 4, device="npu"), torch.randn(4, 5, device="npu"))
torch.bmm(torch.randn(2, 3, 4, device="npu"), torch.randn(2, 4, 5, device="npu"))
y = torch.randn(3, 4, device="npu")
y.mean(1); y.amax(0); y.max(0); y.argmax(); y.var(0); y.std(); torch.var_mean(y, 1)
y.softmax(-1); y.log_softmax(-1); F.layer_norm(y, (4,)); torch.where(y > 0, y, 0.0)
y.abs(); y.exp(); torch.cat([y, y])
F.mse_loss(y.clone().requires_grad_(), torch.zeros(3, 4, device="npu")).backward()
y.view(12).reshape(4, 3).t().transpose(0, 1).permute(1, 0).unsqueeze(0).squeeze(0)
y.expand(2, 3, 4)[0, 1:3].select(0, 1).as_strided((2,), (1,))
emb = torch.nn.Embedding(10, 4).npu(); emb(torch.tensor([[1, 2], [3, 1]], device="npu")).sum().backward()
y.zero_(); y.fill_(2); y.add_(1); y.mul_(y); y.relu_()
torch.npu.synchronize()
print(sorted(m for m in %r if m in sys.modules))
"""


def test_common_ops_do_not_import_python_meta_dependencies():
    out = run_py_ok(_COMMON_OPS % (_LAZY_MODULES,))
    assert out.strip().splitlines()[-1] == "[]", out


_DESCRIBE = r"""
import json
import torch
import torch_npu
import torch.nn.functional as F

def describe(t):
    return [list(t.shape), list(t.stride()), str(t.dtype)]

g = torch.Generator().manual_seed(0)
a = torch.randn(4, 6, generator=g)
b = torch.randn(6, 5, generator=g)
i = torch.arange(-12, 12).reshape(4, 6)
cases = {
    "add_scalar": lambda d: d(a) + 1,
    "add_int_float": lambda d: d(i) + 1.5,
    "div_int": lambda d: d(i) / 2,
    "mm": lambda d: d(a) @ d(b),
    "addmm": lambda d: torch.addmm(d(torch.ones(5)), d(a).t(), d(a)[:, :5]),
    "sum_dim": lambda d: d(a).sum(0, keepdim=True),
    "sum_int": lambda d: d(i).sum(1),
    "mean_t": lambda d: d(a).t().mean(1),
    "amax": lambda d: d(a).amax(1),
    "relu_t": lambda d: torch.relu(d(a).t()),
    "relu_int": lambda d: torch.relu(d(i)),
    "where_bcast": lambda d: torch.where(d(a)[:, :1] > 0, d(a), d(torch.zeros(6, dtype=torch.float64))),
    "where_scalar": lambda d: torch.where(d(a) > 0, d(a), 0.0),
    "var": lambda d: d(a).var(1),
    "std_keepdim": lambda d: d(a).std((0, 1), keepdim=True),
    "var_mean": lambda d: torch.var_mean(d(a), 0)[1],
    "var_complex": lambda d: d(torch.complex(a, a)).var(0),
    "abs_int": lambda d: d(i).abs(),
    "layer_norm": lambda d: F.layer_norm(d(a), (6,)),
    "softmax_t": lambda d: d(a).t().softmax(0),
    "cat": lambda d: torch.cat([d(a), d(a)], 1),
    "sigmoid_int": lambda d: torch.sigmoid(d(i)),
    "index_select": lambda d: d(a).t().index_select(1, d(torch.tensor([3, 0, 3]))),
    "index_select_0d": lambda d: d(torch.tensor(2.0)).index_select(0, d(torch.tensor([0]))),
    "embedding_backward": lambda d: torch.ops.aten.embedding_dense_backward(d(a), d(torch.tensor([1, 2, 1, 0])), 7, -1, False),
    "batch_norm": lambda d: F.batch_norm(d(a), None, None, training=True),
    "batch_norm_mean": lambda d: torch.native_batch_norm(d(a), d(torch.ones(6)), None, None, None, True, 0.1, 1e-5)[1],
    "batch_norm_3d": lambda d: torch.native_batch_norm(d(a.reshape(2, 3, 4)), None, None, d(torch.zeros(3)), d(torch.ones(3)), True, 0.1, 1e-5)[2],
}
out = {}
for name, fn in cases.items():
    out[name] = [describe(fn(lambda t: t.npu())), describe(fn(lambda t: t))]
torch.npu.synchronize()
print(json.dumps(out))
"""


def _descriptions(env=None):
    return json.loads(run_py_ok(_DESCRIBE, env=env).strip().splitlines()[-1])


def test_cpp_metadata_is_the_cpu_kernels():
    for name, (npu, cpu) in _descriptions().items():
        assert npu == cpu, name


def test_cpp_metadata_matches_the_python_meta_kernels():
    cpp = _descriptions()
    python = _descriptions({"NPU_CPP_META": "0"})
    for name in cpp:
        assert cpp[name][0] == python[name][0], name


def test_cpp_meta_kernels_raise_like_the_cpu_kernel():
    x = torch.randn(3, device="npu")
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        torch.arange(3, device="npu").var()
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torch.relu(x > 0)
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        x + torch.ones(4, device="npu")
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.randn(2, 3).npu().var((1, 1))
    torch.npu.synchronize()


def test_mse_loss_backward_matches_cpu():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    grads = []
    for device in ("npu", "cpu"):
        x = a.to(device).requires_grad_()
        F.mse_loss(x, b.to(device)).backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0].cpu(), grads[1])
