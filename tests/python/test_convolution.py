"""Convolutions on npu tensors (convolution_overrideable and
convolution_backward_overrideable, csrc/aten/Convolution.cpp): every variant
gives the CPU result in forward and backward — 1d/2d/3d, transposed, grouped,
dilated, padded, strided, output_padding, with and without bias, channels
last, float64 and bfloat16, empty batches, the second device, double
backward — each grad of the output_mask alone; the work runs as one task on
the current stream (waited on with synchronize, never by sleeping), a failed
task poisons its outputs, and bad arguments raise a RuntimeError naming the
problem at the call while the stream keeps working."""

from __future__ import annotations

import ctypes

import pytest
import torch
import torch.nn.functional as F

from conftest import device_works, load_npurt

TOL = dict(rtol=1e-4, atol=1e-5)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# (conv function, input size, weight size, bias?, keyword arguments)
CASES = {
    "1d": (F.conv1d, (2, 3, 11), (4, 3, 3), True, {}),
    "1d_strided_padded": (F.conv1d, (2, 3, 11), (4, 3, 5), True, dict(stride=2, padding=2)),
    "2d": (F.conv2d, (2, 3, 9, 8), (5, 3, 3, 3), True, {}),
    "2d_no_bias": (F.conv2d, (2, 3, 9, 8), (5, 3, 3, 2), False, dict(padding=(1, 2))),
    "2d_grouped_dilated": (F.conv2d, (2, 4, 10, 10), (6, 2, 3, 3), True, dict(groups=2, dilation=2, padding=1)),
    "2d_depthwise": (F.conv2d, (2, 4, 7, 7), (8, 1, 3, 3), True, dict(groups=4, stride=2)),
    "2d_same": (F.conv2d, (1, 3, 8, 8), (4, 3, 3, 3), True, dict(padding="same", dilation=2)),
    "3d": (F.conv3d, (1, 2, 5, 6, 5), (3, 2, 3, 3, 3), True, dict(padding=1)),
    "3d_strided": (F.conv3d, (2, 2, 7, 7, 7), (4, 2, 3, 2, 3), False, dict(stride=(2, 1, 2))),
    "t1d": (F.conv_transpose1d, (2, 3, 7), (3, 4, 3), True, dict(stride=2, output_padding=1)),
    "t2d": (F.conv_transpose2d, (2, 4, 5, 6), (4, 3, 3, 3), True, dict(stride=2, padding=1)),
    "t2d_grouped": (F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), False,
                    dict(groups=2, stride=2, padding=1, output_padding=1)),
    "t2d_dilated": (F.conv_transpose2d, (1, 2, 4, 4), (2, 3, 2, 2), True, dict(dilation=3, stride=2, output_padding=2)),
    "t3d": (F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 3, 3, 3), True, dict(stride=2)),
    "unbatched_2d": (F.conv2d, (3, 9, 8), (5, 3, 3, 3), True, {}),
}


def _make(case, dtype=torch.float32, seed=0):
    fn, xs, ws, has_bias, kw = case
    g = _gen(seed)
    x = torch.randn(xs, generator=g, dtype=dtype)
    w = torch.randn(ws, generator=g, dtype=dtype)
    out_channels = ws[1] * kw.get("groups", 1) if "transpose" in fn.__name__ else ws[0]
    b = torch.randn(out_channels, generator=g, dtype=dtype) if has_bias else None
    return fn, x, w, b, kw


def _forward_backward(fn, x, w, b, kw, device):
    leaves = [t.detach().to(device).requires_grad_() if t is not None else None for t in (x, w, b)]
    y = fn(*leaves, **kw)
    grad = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape).to(device)
    y.backward(grad)
    return y, [t.grad if t is not None else None for t in leaves]


@pytest.mark.parametrize("name", list(CASES))
def test_convolution_and_its_backward_match_cpu(name):
    fn, x, w, b, kw = _make(CASES[name])
    y, grads = _forward_backward(fn, x, w, b, kw, "cpu")
    yn, grads_n = _forward_backward(fn, x, w, b, kw, "npu")
    assert yn.device.type == "npu" and yn.shape == y.shape and yn.dtype == y.dtype
    torch.testing.assert_close(yn.cpu(), y, **TOL)
    for g, gn in zip(grads, grads_n):
        if g is None:
            assert gn is None
        else:
            assert gn.device.type == "npu"
            torch.testing.assert_close(gn.cpu(), g, **TOL)


@pytest.mark.parametrize("name", ["2d", "t2d_grouped", "3d"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_each_gradient_alone(name, which):
    """autograd asks only for the gradient it needs (output_mask)."""
    fn, x, w, b, kw = _make(CASES[name])
    b = b if b is not None else torch.zeros(w.shape[1] * kw.get("groups", 1) if "transpose" in fn.__name__ else w.shape[0])
    expected = torch.autograd.grad(fn(*(t.requires_grad_(i == which) for i, t in enumerate((x, w, b))), **kw).sum(),
                                   [x, w, b][which])[0]
    leaves = [t.detach().to("npu").requires_grad_(i == which) for i, t in enumerate((x, w, b))]
    got = torch.autograd.grad(fn(*leaves, **kw).sum(), leaves[which])[0]
    torch.testing.assert_close(got.cpu(), expected, **TOL)


def test_backward_overrideable_leaves_masked_gradients_undefined():
    _, x, w, _, _ = _make(CASES["2d"])
    go = torch.ones(2, 5, 7, 6)
    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    for mask in ([True, False, False], [False, True, True], [False, False, False]):
        got = torch.ops.aten.convolution_backward_overrideable(go.to("npu"), x.to("npu"), w.to("npu"), *args, mask)
        ref = torch.ops.aten.convolution_backward(go, x, w, [5], *args, mask)
        for wanted, g, r in zip(mask, got, ref):
            assert (g is not None) == wanted
            if wanted:
                torch.testing.assert_close(g.cpu(), r, **TOL)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, {}), (torch.bfloat16, dict(rtol=2e-2, atol=2e-2))])
def test_other_dtypes(dtype, tol):
    fn, x, w, b, kw = _make(CASES["2d_grouped_dilated"], dtype=dtype)
    y, grads = _forward_backward(fn, x, w, b, kw, "cpu")
    yn, grads_n = _forward_backward(fn, x, w, b, kw, "npu")
    assert yn.dtype == dtype
    torch.testing.assert_close(yn.cpu(), y, **tol)
    for g, gn in zip(grads, grads_n):
        torch.testing.assert_close(gn.cpu(), g, **tol)


def test_channels_last_input_gives_a_channels_last_output_with_cpu_values():
    fn, x, w, b, kw = _make(CASES["2d"])
    x = x.to(memory_format=torch.channels_last)
    y, grads = _forward_backward(fn, x, w, b, kw, "cpu")
    xn = x.to("npu")
    assert xn.is_contiguous(memory_format=torch.channels_last)
    yn = fn(xn, w.to("npu"), b.to("npu"), **kw)
    assert yn.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(yn.cpu(), y, **TOL)
    _, grads_n = _forward_backward(fn, x, w, b, kw, "npu")
    for g, gn in zip(grads, grads_n):
        torch.testing.assert_close(gn.cpu(), g, **TOL)


def test_empty_batch():
    x = torch.randn(0, 3, 8, 8)
    w = torch.randn(4, 3, 3, 3)
    y = F.conv2d(x.to("npu"), w.to("npu"))
    assert y.shape == (0, 4, 6, 6) and y.device.type == "npu"
    xn = x.to("npu").requires_grad_()
    wn = w.to("npu").requires_grad_()
    F.conv2d(xn, wn).sum().backward()
    assert xn.grad.shape == x.shape
    assert wn.grad.cpu().abs().sum().item() == 0


def test_second_device():
    fn, x, w, b, kw = _make(CASES["t2d"])
    y = fn(x, w, b, **kw)
    yn = fn(x.to("npu:1"), w.to("npu:1"), b.to("npu:1"), **kw)
    assert yn.device == torch.device("npu:1")
    torch.testing.assert_close(yn.cpu(), y, **TOL)


def test_double_backward():
    fn, x, w, b, kw = _make(CASES["2d_grouped_dilated"])

    def gradient_penalty(device):
        xs, ws = (t.detach().to(device).requires_grad_() for t in (x, w))
        (gx,) = torch.autograd.grad(fn(xs, ws, b.to(device), **kw).square().sum(), xs, create_graph=True)
        penalty = gx.square().sum()
        penalty.backward()
        return penalty, ws.grad

    p, gw = gradient_penalty("cpu")
    pn, gwn = gradient_penalty("npu")
    torch.testing.assert_close(pn.cpu(), p, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(gwn.cpu(), gw, rtol=1e-4, atol=1e-3)


def test_convolution_runs_on_the_current_stream(gate):
    fn, x, w, b, kw = _make(CASES["2d"])
    xn, wn, bn = x.to("npu"), w.to("npu"), b.to("npu")
    s = torch.npu.Stream()
    torch.npu.synchronize()
    g = gate(s)
    with torch.npu.stream(s):
        yn = fn(xn, wn, bn, **kw)  # queued behind the gate; returns at once
        done = torch.npu.Event()
        done.record()
    assert yn.shape == (2, 5, 7, 6)
    assert not done.query()
    assert torch.npu.default_stream().query()
    g.release()
    done.synchronize()
    torch.testing.assert_close(yn.cpu(), fn(x, w, b, **kw), **TOL)


def _arm_task_fault(nth: int) -> None:
    rt = load_npurt()
    rt.npuSetFaultInjection.argtypes = [ctypes.c_int, ctypes.c_uint64]
    assert rt.npuSetFaultInjection(1, nth) == 0  # 1: the nth work task fails


def test_a_failed_convolution_poisons_its_output_and_what_reads_it():
    fn, x, w, b, kw = _make(CASES["2d"])
    xn, wn, bn = x.to("npu"), w.to("npu"), b.to("npu")
    s = torch.npu.Stream()
    torch.npu.synchronize()
    try:
        _arm_task_fault(1)
        with torch.npu.stream(s):
            y = fn(xn, wn, bn, **kw)
        with pytest.raises(RuntimeError, match="aten::convolution_overrideable.*injected fault"):
            s.synchronize()
    finally:
        _arm_task_fault(0)
    with torch.npu.stream(s):
        z = fn(y, torch.ones(2, 5, 1, 1, device="npu"))  # reads the poisoned output
    s.synchronize()  # spreading the poison is not a new failure
    for t in (y, z):
        with pytest.raises(RuntimeError, match="no valid data.*injected fault"):
            t.cpu()
    torch.testing.assert_close(fn(xn, wn, bn, **kw).cpu(), fn(x, w, b, **kw), **TOL)


def _npu(*size, dtype=torch.float32, device="npu"):
    return torch.randn(*size, dtype=dtype, device=device)


BAD_CALLS = [
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 3, 3, 3)),
     r"expected input\[2, 5, 8, 8\] to have 3 channels, but got 5 channels"),
    (lambda: torch.nn.Conv2d(3, 4, 3).to("npu")(_npu(1, 4, 8, 8)), r"to have 3 channels, but got 4 channels"),
    (lambda: F.conv2d(_npu(2, 4, 8, 8), _npu(4, 3, 3, 3), groups=2), r"Given groups=2.*to have 6 channels"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 5, 3)), r"stride.*match the convolution dimensions"),
    (lambda: F.conv1d(_npu(2, 5, 8), _npu(4, 5, 3, 3)),
     r"Expected 4-dimensional input for 4-dimensional weight \[4, 5, 3, 3\], but got 3-dimensional input"),
    (lambda: F.conv_transpose2d(_npu(2, 5, 8, 8), _npu(4, 3, 3, 3)), r"transposed=1.*to have 4 channels"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 5, 3, 3), _npu(3)), r"expected bias to be 1-dimensional with 4"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 5, 9, 9)), r"Kernel size can't be greater than actual input size"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 5, 3, 3, dtype=torch.float64)),
     r"convolution_overrideable: expected weight to have the dtype of input \(Float\), but got Double"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), torch.randn(4, 5, 3, 3)), r"same device.*cpu and npu"),
    (lambda: F.conv2d(_npu(2, 5, 8, 8), _npu(4, 5, 3, 3, device="npu:1")), r"same device.*npu:0 and npu:1"),
    (lambda: F.conv_transpose2d(_npu(1, 5, 4, 4), _npu(5, 3, 3, 3), output_padding=2),
     r"output_padding to be non-negative and smaller than stride or dilation"),
    # Direct calls skip PyTorch's front end; the kernel checks them itself.
    (lambda: torch.ops.aten.convolution_overrideable(_npu(2, 5, 8, 8), _npu(4, 3, 3, 3), None, [1, 1], [0, 0],
                                                     [1, 1], False, [0, 0], 1),
     r"weight of size \[4, 3, 3, 3\], expected input of size \[2, 5, 8, 8\] to have 3 channels"),
    (lambda: torch.ops.aten.convolution_overrideable(_npu(2, 5, 8, 8), _npu(4, 5, 3), None, [1], [0], [1], False,
                                                     [0], 1),
     r"expected a 4-D weight for a 4-D input, but got weight of size \[4, 5, 3\]"),
    (lambda: torch.ops.aten.convolution_overrideable(_npu(5, 8), _npu(4, 5, 3), None, [1], [0], [1], False, [0], 1),
     r"expected a 3-D, 4-D or 5-D input"),
    (lambda: torch.ops.aten.convolution_overrideable(_npu(2, 5, 8, 8), _npu(4, 5, 3, 3), None, [1, 1, 1], [0, 0],
                                                     [1, 1], False, [0, 0], 1),
     r"expected stride to have 2 elements"),
    (lambda: torch.ops.aten.convolution_overrideable(_npu(2, 5, 8, 8), _npu(4, 5, 3, 3), None, [0, 1], [0, 0],
                                                     [1, 1], False, [0, 0], 1),
     r"expected positive stride"),
    (lambda: torch.ops.aten.convolution_overrideable(_npu(2, 6, 8, 8), _npu(3, 3, 3, 3), None, [1, 1], [0, 0],
                                                     [1, 1], False, [0, 0], 2),
     r"weight's first dimension to be divisible by groups=2"),
    (lambda: torch.ops.aten.convolution_backward_overrideable(_npu(2, 4, 5, 5), _npu(2, 5, 8, 8), _npu(4, 5, 3, 3),
                                                              [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                              [True, True, True]),
     r"expected grad_output of size \[2, 4, 6, 6\]"),
]


@pytest.mark.parametrize("call,match", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_bad_convolution_arguments_raise_at_the_call(call, match):
    s = torch.npu.current_stream()
    with pytest.raises(RuntimeError, match=match):
        call()
    s.synchronize()  # nothing was queued that fails later
    device_works(0)
    x = torch.ones(1, 1, 3, 3, device="npu")
    assert F.conv2d(x, torch.ones(1, 1, 2, 2, device="npu")).flatten().tolist() == [4.0] * 4
