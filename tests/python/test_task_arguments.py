"""How an eager op task takes its arguments (Note [Aliases are made where the kernel runs]).

An eager task takes npu tensors of its own stream as metadata snapshots and Python numbers by
value, and makes the kernel's views of them on the executor; Python numbers of pointwise ops are
made in the op's dtype there (Note [Wrapped numbers of pointwise ops]). These tests pin what a
program sees: CPU's results bit for bit, CPU's errors, and the arguments as they were when the
op was queued, however the program changes its tensors before the task runs.
"""

from typing import Callable

import pytest
import torch

import torch_npu  # noqa: F401

NUMBERS = [1, -3, 1.5, 1e-4, 3.3e38, True, False, 2 + 0.5j]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.bool, torch.complex64]
OPS: dict = {
    "add": lambda x, n: x + n,
    "radd": lambda x, n: n + x,
    "sub": lambda x, n: x - n,
    "mul": lambda x, n: x * n,
    "div": lambda x, n: x / n,
    "pow": lambda x, n: x**n,
    "eq": lambda x, n: x == n,
    "lt": lambda x, n: x < n,
    "clamp": lambda x, n: torch.clamp(x, min=n),
    "add_alpha": lambda x, n: torch.add(x, n, alpha=2),
    "where": lambda x, n: torch.where(x != 0, x, n),
}


def _outcome(fn: Callable, x: torch.Tensor, n: object):
    try:
        return fn(x, n), None
    except Exception as e:  # compared with npu's
        return None, e


def _sample(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        return torch.rand(17, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(17, generator=g, dtype=torch.float64) * 4).to(dtype)
    return torch.randint(0, 9, (17,), generator=g).to(dtype)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_python_numbers_give_cpu_results_bit_for_bit(op, dtype):
    x = _sample(dtype)
    xn = x.npu()
    for n in NUMBERS:
        expected, error = _outcome(OPS[op], x, n)
        if error is not None:
            # A kernel's own failure surfaces at the next synchronize as the
            # stream's RuntimeError (NotImplementedError is one).
            kind = RuntimeError if isinstance(error, RuntimeError) else type(error)
            with pytest.raises(kind):
                OPS[op](xn, n)
                torch.npu.synchronize()
            continue
        got = OPS[op](xn, n)
        assert got.device.type == "npu"
        assert got.dtype == expected.dtype, (n, got.dtype, expected.dtype)
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True,
                                   msg=lambda m: f"{op} {dtype} with {n!r}: {m}")


def test_arguments_are_snapshots_taken_at_enqueue(gate):
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        x = torch.arange(6, dtype=torch.float32, device="npu").reshape(2, 3)
        torch.npu.synchronize()
        g = gate(s)
        y = x * 2  # queued behind the gate
        z = y + 1.5
        # The program changes the tensors' metadata before the tasks run.
        x.unsqueeze_(0)
        x.t_() if x.dim() == 2 else x.transpose_(1, 2)
        y.unsqueeze_(0)
        done = torch.npu.Event()
        done.record()
    assert not done.query()
    g.release()
    done.synchronize()
    expected = torch.arange(6, dtype=torch.float32).reshape(2, 3) * 2
    assert y.shape == (1, 2, 3)
    torch.testing.assert_close(y.cpu()[0], expected, rtol=0, atol=0)
    torch.testing.assert_close(z.cpu(), expected + 1.5, rtol=0, atol=0)


def test_a_dropped_input_is_read_before_its_memory_is_reused(gate):
    # An aliased input's memory goes back to the stream's pool as soon as the
    # program drops it; the next allocation on the stream may take it, and the
    # work that writes it is queued behind the task that reads it.
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        torch.npu.synchronize()
        g = gate(s)
        x = torch.full((64,), 3.0, device="npu")
        y = x + 1
        del x
        w = torch.full((64,), -7.0, device="npu")  # may take x's block
        done = torch.npu.Event()
        done.record()
    g.release()
    done.synchronize()
    assert torch.equal(y.cpu(), torch.full((64,), 4.0))
    assert torch.equal(w.cpu(), torch.full((64,), -7.0))


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4, 5), (2, 1, 3, 1, 2), (1, 2, 1, 2, 1, 2, 1)],
                         ids=lambda s: f"{len(s)}d")
def test_tensors_of_any_rank_and_layout(shape):
    # Snapshots hold up to four dimensions; more take the other capture path.
    x = torch.randn(shape)
    y = torch.randn(shape).transpose(0, -1)
    xn, yn = x.npu(), y.npu()
    torch.testing.assert_close((xn.transpose(0, -1) * yn + 2).cpu(), x.transpose(0, -1) * y + 2,
                               rtol=0, atol=0)
    torch.testing.assert_close((xn[..., ::2] - 1).cpu(), x[..., ::2] - 1, rtol=0, atol=0)
    torch.testing.assert_close(torch.addcmul(xn, xn, xn, value=0.5).cpu(),
                               torch.addcmul(x, x, x, value=0.5), rtol=0, atol=0)


def test_ops_with_several_outputs_and_views():
    x = torch.randn(4, 5)
    xn = x.npu()
    values, indices = torch.sort(xn, dim=1)
    v, i = torch.sort(x, dim=1)
    assert torch.equal(values.cpu(), v) and torch.equal(indices.cpu(), i)
    mean, inv = torch.ops.aten.native_layer_norm(xn, [5], None, None, 1e-5)[1:]
    m, iv = torch.ops.aten.native_layer_norm(x, [5], None, None, 1e-5)[1:]
    torch.testing.assert_close(mean.cpu(), m)
    torch.testing.assert_close(inv.cpu(), iv)
    torch.testing.assert_close(torch.aminmax(xn, dim=0).min.cpu(), torch.aminmax(x, dim=0).min)


def test_conjugate_and_negative_views_are_resolved():
    z = torch.randn(6, dtype=torch.complex64)
    zn = z.npu()
    torch.testing.assert_close((zn.conj() * 2).cpu(), z.conj() * 2, rtol=0, atol=0)
    torch.testing.assert_close((zn.conj()._neg_view() + 1).cpu(), -z.conj() + 1, rtol=0, atol=0)


def test_out_and_in_place_ops_with_numbers():
    x = torch.randn(9)
    out = torch.empty(9, device="npu")
    torch.add(x.npu(), 2.5, out=out)
    torch.testing.assert_close(out.cpu(), x + 2.5, rtol=0, atol=0)
    xn = x.npu()
    xn.mul_(3).sub_(1).div_(7)
    torch.testing.assert_close(xn.cpu(), ((x * 3) - 1) / 7, rtol=0, atol=0)
    i = torch.arange(9, dtype=torch.int32, device="npu")
    i.mul_(2).add_(True)
    assert torch.equal(i.cpu(), torch.arange(9, dtype=torch.int32) * 2 + 1)


def test_failing_kernel_with_numbers_is_reported_once_to_its_stream():
    # lt has no complex CPU kernel: the task fails, its stream reports it once.
    s = torch.npu.Stream()
    x = torch.randn(4, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s):
        y = x < (2 + 0.5j)
    with pytest.raises(RuntimeError, match="lt"):
        s.synchronize()
    s.synchronize()  # reported once
    torch.testing.assert_close((x + 0.5).cpu(), x.cpu() + 0.5, rtol=0, atol=0)
    del y


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_replayed_numbers_of_reduced_float_ops_keep_their_bits(dtype):
    # Half and BFloat16 kernels compute in float and read a wrapped number's
    # original value: a number converted to the tensor's dtype ahead of them
    # loses bits (Note [Wrapped numbers of pointwise ops]).
    x = (torch.randn(33, dtype=torch.float64) * 1000).to(dtype)
    xn = x.npu()
    s = torch.npu.Stream()
    s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s):
        xn * 2  # warm-up outside the capture
    torch.npu.current_stream().wait_stream(s)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = xn * 1e-4
        z = xn / 3.3
    for _ in range(2):
        g.replay()
        torch.testing.assert_close(y.cpu(), x * 1e-4, rtol=0, atol=0)
        torch.testing.assert_close(z.cpu(), x / 3.3, rtol=0, atol=0)
