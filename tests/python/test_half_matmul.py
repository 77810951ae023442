"""Half matrix products on npu (csrc/aten/HalfMatmul.cpp, Note [Half matrix
products compute in float]): mm, addmm, bmm, baddbmm and addbmm of float16
operands are computed in float and rounded once, as CUDA's half GEMM, instead
of by PyTorch's scalar CPU loop for half (about 200 times slower here), which
made mixed-precision training crawl. The last test is torch_npu's
test_graph_make_graphed_callables_with_amp_cache_disabled_allow_unused_input
(which ran for over 400 s without finishing) made small: about 45 products of
512x1024 by 1024x1024, each of which took about 1 s on the scalar loop; the
whole test takes about 4 s now."""

from __future__ import annotations

import pytest
import torch
import torch_npu


def _half(*size: int) -> torch.Tensor:
    return torch.randn(*size).half()


# (op, CPU operands); products long enough (k = 512) that rounding in another
# order than float's would show.
CASES = {
    "mm": (torch.mm, lambda: (_half(64, 512), _half(512, 48)), {}),
    "addmm": (torch.addmm, lambda: (_half(48), _half(64, 512), _half(512, 48)),
              dict(beta=0.5, alpha=2.0)),
    "bmm": (torch.bmm, lambda: (_half(3, 32, 512), _half(3, 512, 16)), {}),
    "baddbmm": (torch.baddbmm, lambda: (_half(3, 32, 16), _half(3, 32, 512), _half(3, 512, 16)),
                dict(beta=-1.0, alpha=0.25)),
    "addbmm": (torch.addbmm, lambda: (_half(32, 16), _half(3, 32, 512), _half(3, 512, 16)), {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_half_products_are_float_products_rounded_once(name):
    op, make, kwargs = CASES[name]
    torch.manual_seed(0)
    operands = make()
    got = op(*(t.npu() for t in operands), **kwargs)
    assert got.dtype == torch.float16 and got.device.type == "npu"
    # Accumulated in float, rounded once: the exact product rounded to half,
    # up to float's own rounding (no error accumulated in half precision).
    exact = op(*(t.double() for t in operands), **kwargs)
    torch.testing.assert_close(got.cpu().double(), exact.half().double(), rtol=2.0 ** -10,
                               atol=1e-3)
    # Float math rounded to half, bit for bit but where the BLAS's summation
    # order differs from the host's.
    expected = op(*(t.float() for t in operands), **kwargs).half()
    assert (got.cpu() != expected).float().mean().item() < 0.01


def test_transposed_and_strided_half_operands():
    torch.manual_seed(1)
    a, b = _half(300, 64), _half(300, 40)
    got = torch.mm(a.npu().t(), b.npu()[:, ::2])
    expected = torch.mm(a.float().t(), b.float()[:, ::2]).half()
    torch.testing.assert_close(got.cpu(), expected, atol=1e-2, rtol=1e-3)


def test_other_dtypes_and_bad_calls_keep_the_generic_path():
    a = torch.randn(4, 3)
    torch.testing.assert_close(torch.mm(a.npu(), a.t().npu()).cpu(), a @ a.t())
    bf = a.bfloat16()
    torch.testing.assert_close(torch.mm(bf.npu(), bf.t().npu()).cpu(), bf @ bf.t())
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a.npu(), a.half().t().npu())
    with pytest.raises(RuntimeError, match="reduction dim|cannot be multiplied"):
        torch.mm(a.half().npu(), a.half().npu())
    empty = torch.mm(torch.ones(2, 0).half().npu(), torch.ones(0, 3).half().npu())
    assert empty.cpu().tolist() == [[0.0] * 3] * 2
    torch.npu.synchronize()


def test_half_product_is_queued_on_the_current_stream(gate):
    a, b = _half(16, 32).npu(), _half(32, 8).npu()
    s = torch.npu.Stream()
    torch.npu.synchronize()
    g = gate(s)
    with torch.npu.stream(s):
        c = a @ b
        done = torch.npu.Event()
        done.record()
    assert not done.query()
    g.release()
    done.synchronize()
    torch.testing.assert_close(c.cpu(), (a.cpu().float() @ b.cpu().float()).half())


def test_graphed_amp_training_with_dict_inputs_matches_eager():
    # torch_npu's test_graph_make_graphed_callables (with_amp, cache disabled,
    # allow_unused_input), smaller: graphed and eager models train alike.
    n, d_in, h = 512, 1024, 1024
    torch.manual_seed(5)

    class Section(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(d_in, h), torch.nn.Dropout(0.1))

        def forward(self, inputs: dict) -> torch.Tensor:
            return self.net(inputs["x"])

    models = [torch.nn.Sequential(Section(), torch.nn.Linear(h, 64)).npu() for _ in range(2)]
    graphed, control = models
    graphed.load_state_dict(control.state_dict())
    x = torch.randn(n, d_in, device="npu")
    unused = torch.randn(n, h, device="npu", requires_grad=True)
    hidden = torch.randn(n, h, device="npu", requires_grad=True)
    with torch.npu.amp.autocast(True, cache_enabled=False):
        graphed[0], graphed[1] = torch.npu.make_graphed_callables(
            (graphed[0], graphed[1]), (({"x": x, "unused_input": unused},), (hidden,)),
            allow_unused_input=True)
    data = [torch.rand_like(x) for _ in range(3)]
    targets = [torch.rand(n, 64, device="npu") for _ in range(3)]
    for model in (graphed, control):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(5)
        torch.npu.manual_seed(5)
        for inp, target in zip(data, targets):
            opt.zero_grad(set_to_none=True)
            with torch.npu.amp.autocast(True, cache_enabled=False):
                out = model({"x": inp, "unused_input": unused})
                torch.nn.functional.mse_loss(out.float(), target).backward()
            opt.step()
    for p, q in zip(graphed.parameters(), control.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu())
