"""torch_npu.optim's fused optimizers and the combined buffers under them (torch_npu.utils).

- combining: aliasing, values, ownership of the buffer, asynchrony (a blocked
  stream), the host sync of re-combining, bad inputs;
- each optimizer against a CPU reference over several steps: torch.optim's
  optimizer where there is one, the documented formula otherwise (Lamb,
  AdamP, BertAdam, RMSpropTF), with parameter groups, fp16 parameters and
  parameters without gradients; _DistributedMuon against torch.optim.Muon,
  without a process group and over DTensor shards of two ranks;
- zero_grad, clip_grad_norm_fused_, state_dict round trips, gradients replaced
  by the program, bad hyper-parameters and parameters.
"""

import copy
import math
import sys

import pytest
import torch
import torch_npu
from torch_npu.optim import (
    NpuFusedAdadelta, NpuFusedAdam, NpuFusedAdamP, NpuFusedAdamW, NpuFusedBertAdam,
    NpuFusedLamb, NpuFusedRMSprop, NpuFusedRMSpropTF, NpuFusedSGD,
)
from torch_npu.utils import get_part_combined_tensor, is_combined_tensor_valid, npu_combine_tensors


def _randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device="npu")


# -- combined buffers ----------------------------------------------------------


def test_combine_moves_storages_and_keeps_values():
    x, y, z = _randn(2, 3), _randn(4), _randn(3, 1, 2)
    before = [t.cpu() for t in (x, y, z)]
    combined = npu_combine_tensors([x, y, z])
    assert combined.shape == (6 + 4 + 6,) and combined.is_contiguous()
    assert x.data_ptr() == combined.data_ptr()
    assert y.data_ptr() == combined.data_ptr() + 6 * 4
    assert z.data_ptr() == combined.data_ptr() + 10 * 4
    for t, b in zip((x, y, z), before):
        assert torch.equal(t.cpu(), b)
    combined.add_(1)  # one op on the buffer is an op on every tensor
    for t, b in zip((x, y, z), before):
        assert torch.equal(t.cpu(), b + 1)
    assert is_combined_tensor_valid(combined, [x, y, z])
    assert not is_combined_tensor_valid(combined, [x, y.clone()])
    assert not is_combined_tensor_valid(None, [x])
    part = get_part_combined_tensor(combined, 6, 4)
    assert torch.equal(part.cpu(), y.cpu()) and part.data_ptr() == y.data_ptr()
    assert torch_npu.get_storage_size(part) == 4
    assert get_part_combined_tensor(combined, 0, 0) is None and npu_combine_tensors([]) is None


def test_combine_without_values_zeroes_and_views_follow_the_storage():
    p = torch.nn.Parameter(_randn(3, 3))
    alias = p.data  # shares the storage: must follow it
    combined = npu_combine_tensors([p], require_copy_value=False)
    assert alias.data_ptr() == p.data_ptr() == combined.data_ptr()
    assert torch.count_nonzero(alias).item() == 0


def test_the_buffer_lives_while_a_tensor_points_into_it():
    x = _randn(1000)
    expected = x.cpu()
    combined = npu_combine_tensors([x])
    del combined  # torch_npu would leave x dangling here
    churn = [torch.full((1000,), 7.0, device="npu") for _ in range(20)]
    assert torch.equal(x.cpu(), expected)
    del churn


def test_combining_is_queued_on_the_stream(gate):
    x, y = _randn(64), _randn(64)
    expected = torch.cat([x.cpu(), y.cpu()])
    torch.npu.synchronize()
    torch_npu.npu.reset_host_sync_stats()
    stream = torch.npu.current_stream()
    with gate(stream):
        x.mul_(2)  # queued behind the gate: the combination must copy its result
        combined = npu_combine_tensors([x, y])
        assert torch_npu.npu.host_sync_count() == 0
    torch.npu.synchronize()
    assert torch.equal(combined.cpu(), expected * torch.cat([torch.full((64,), 2.0), torch.ones(64)]))


def test_combining_a_combined_tensor_again_waits_for_the_device_and_says_so():
    x, y = _randn(8), _randn(8)
    npu_combine_tensors([x, y])
    expected = [x.cpu(), y.cpu()]
    torch_npu.npu.reset_host_sync_stats()
    again = npu_combine_tensors([y, x])
    assert dict(torch_npu.npu.host_sync_stats()).get("npu_change_data_ptr", 0) >= 1
    assert torch.equal(again.cpu(), torch.cat([expected[1], expected[0]]))


@pytest.mark.parametrize("tensors, message", [
    (lambda: [_randn(2), None], "must not have `None`"),
    (lambda: [_randn(2), _randn(2, dtype=torch.float16)], "same dtype"),
    (lambda: [torch.randn(2)], "must be on NPU, got cpu"),
    (lambda: [_randn(3, 2).t()], "must be contiguous"),
    (lambda: [torch.ones(2, dtype=torch.int32, device="npu")], "float32, float16 or bfloat16"),
])
def test_combine_rejects_bad_tensors(tensors, message):
    with pytest.raises(RuntimeError, match=message):
        npu_combine_tensors(tensors())


def test_combine_rejects_tensors_of_two_devices():
    if torch.npu.device_count() < 2:
        pytest.skip("needs two simulated devices (NPU_SIM_DEVICE_COUNT)")
    with pytest.raises(RuntimeError, match="must be on one NPU"):
        npu_combine_tensors([_randn(2), torch.randn(2, device="npu:1")])


def test_change_data_ptr_rejects_bad_offsets():
    dst, src = _randn(4), _randn(6)
    with pytest.raises(RuntimeError, match="Offsets overflow"):
        torch_npu.npu_change_data_ptr(dst, src, 3)  # 3 + 4 > 6 (torch_npu lets this through)
    with pytest.raises(RuntimeError, match="equal or greater than zero, got: -1"):
        torch_npu.npu_change_data_ptr(dst, src, -1)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch_npu.npu_change_data_ptr(dst.half(), src, 0)
    with pytest.raises(RuntimeError, match="Offsets overflow"):
        torch_npu.npu_change_data_ptr(src, src, 1)  # a storage into itself
    with pytest.raises(RuntimeError, match="index \\+ size"):
        get_part_combined_tensor(src, 4, 3)
    assert torch_npu.npu_change_data_ptr(dst, src, 2) == 0
    assert dst.data_ptr() == src.data_ptr() + 8


# -- references ---------------------------------------------------------------


def _lamb_reference(params, states, lr, betas, eps, weight_decay, adam):
    for p, s in zip(params, states):
        m, v = s.setdefault("m", torch.zeros_like(p)), s.setdefault("v", torch.zeros_like(p))
        m.mul_(betas[0]).add_(p.grad, alpha=1 - betas[0])
        v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
        u = m / (v.sqrt() + eps) + weight_decay * p
        w, a = p.norm().clamp(0, 10), u.norm()
        ratio = 1.0 if adam or w == 0 or a == 0 else w / a
        p.sub_(lr * ratio * u)


def _bert_adam_reference(params, states, lr, warmup, t_total, b1, b2, e, weight_decay, max_grad_norm):
    norm = torch.cat([p.grad.flatten() for p in params]).norm()
    for p, s in zip(params, states):
        step = s.setdefault("step", 0)
        g = p.grad * min(1.0, max_grad_norm / (norm.item() + 1e-6)) if max_grad_norm > 0 else p.grad
        m, v = s.setdefault("m", torch.zeros_like(p)), s.setdefault("v", torch.zeros_like(p))
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        x = step / t_total  # warmup_linear
        factor = x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)
        p.sub_(lr * factor * (m / (v.sqrt() + e) + weight_decay * p))
        s["step"] = step + 1


def _rmsprop_tf_reference(params, states, lr, alpha, eps, weight_decay, momentum):
    for p, s in zip(params, states):
        g = p.grad + weight_decay * p
        v = s.setdefault("v", torch.ones_like(p))
        v.add_((g * g - v) * (1 - alpha))
        buf = s.setdefault("buf", torch.zeros_like(p))
        buf.mul_(momentum).add_(lr * g / (v + eps).sqrt())
        p.sub_(buf)


def _adamp_reference(params, states, lr, betas, eps, weight_decay, delta, wd_ratio):
    for p, s in zip(params, states):
        step = s["step"] = s.get("step", 0) + 1
        m, v = s.setdefault("m", torch.zeros_like(p)), s.setdefault("v", torch.zeros_like(p))
        m.mul_(betas[0]).add_(p.grad, alpha=1 - betas[0])
        v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
        perturb = m / ((v.sqrt() / math.sqrt(1 - betas[1] ** step)) + eps)
        ratio = 1.0
        if p.dim() > 1:
            for rows in (lambda t: t.reshape(t.size(0), -1), lambda t: t.reshape(1, -1)):
                pr, gr = rows(p), rows(p.grad)
                cos = (pr * gr).sum(1).abs() / (gr.norm(dim=1) + eps) / (pr.norm(dim=1) + eps)
                if cos.max() < delta / math.sqrt(pr.size(1)):
                    shape = [-1] + [1] * (p.dim() - 1)
                    p_n = p / (pr.norm(dim=1).view(shape) + eps)
                    perturb = perturb - p_n * rows(p_n * perturb).sum(1).view(shape)
                    ratio = wd_ratio
                    break
        p.mul_(1 - lr * weight_decay * ratio)
        p.sub_(lr / (1 - betas[0] ** step) * perturb)


class _FormulaReference:
    """A CPU optimizer from one of the reference functions above."""

    def __init__(self, fn, params, **kwargs):
        self.fn, self.params, self.kwargs = fn, params, kwargs
        self.states = [{} for _ in params]

    def step(self):
        with torch.no_grad():
            active = [(p, s) for p, s in zip(self.params, self.states) if p.grad is not None]
            self.fn([p for p, _ in active], [s for _, s in active], **self.kwargs)


# (fused class, reference factory, keyword arguments)
TORCH_CASES = [
    (NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
    (NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
    (NpuFusedSGD, torch.optim.SGD, dict(lr=0.05)),
    (NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3)),
    (NpuFusedAdam, torch.optim.Adam, dict(lr=2e-2, weight_decay=0.05)),
    (NpuFusedAdam, torch.optim.Adam, dict(lr=2e-2, amsgrad=True)),
    (NpuFusedAdamW, torch.optim.AdamW, dict(lr=2e-2, weight_decay=0.05, amsgrad=True)),
    (NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0, weight_decay=0.05)),
    (NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-2, weight_decay=1e-3)),
    (NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5, centered=True)),
]
FORMULA_CASES = [
    (NpuFusedLamb, _lamb_reference, dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01, adam=False)),
    (NpuFusedLamb, _lamb_reference, dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.0, adam=True)),
    (NpuFusedBertAdam, _bert_adam_reference,
     dict(lr=1e-2, warmup=0.2, t_total=10, b1=0.9, b2=0.999, e=1e-6, weight_decay=0.01, max_grad_norm=1.0)),
    (NpuFusedRMSpropTF, _rmsprop_tf_reference, dict(lr=1e-2, alpha=0.9, eps=1e-3, weight_decay=1e-3, momentum=0.9)),
    (NpuFusedAdamP, _adamp_reference, dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, delta=0.1,
                                           wd_ratio=0.1)),
]


def _make_params(dtype):
    torch.manual_seed(1)
    shapes = [(4, 3), (5,), (2, 3, 2), (3,)]
    return [torch.randn(*s).to(dtype) for s in shapes]


def _run_side_by_side(fused_cls, make_reference, kwargs, dtype, steps=5, grouped=False):
    cpu = [p.clone().requires_grad_() for p in _make_params(dtype)]
    npu = [p.to("npu").requires_grad_() for p in _make_params(dtype)]
    if grouped:  # two groups, the second with its own learning rate; the last parameter never gets a gradient
        lr2 = kwargs["lr"] / 2
        reference = make_reference([{"params": cpu[:2]}, {"params": cpu[2:], "lr": lr2}], **kwargs)
        fused = fused_cls([{"params": npu[:2]}, {"params": npu[2:], "lr": lr2}], **kwargs)
    else:
        reference, fused = make_reference(cpu, **kwargs), fused_cls(npu, **kwargs)
    generator = torch.Generator().manual_seed(2)
    for _ in range(steps):
        for c, n in zip(cpu[:-1], npu[:-1]):
            g = torch.randn(c.shape, generator=generator).to(dtype)
            c.grad, n.grad = g.clone(), g.to("npu")  # a new gradient tensor each step
        reference.step()
        fused.step()
    return cpu, npu


def _assert_close(cpu, npu, dtype):
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    for c, n in zip(cpu, npu):
        torch.testing.assert_close(n.detach().cpu(), c.detach(), **tol)


@pytest.mark.parametrize("fused_cls, reference_cls, kwargs", TORCH_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(TORCH_CASES)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matches_torch_optim(fused_cls, reference_cls, kwargs, dtype):
    cpu, npu = _run_side_by_side(fused_cls, reference_cls, kwargs, dtype, grouped=True)
    _assert_close(cpu, npu, dtype)
    assert torch.equal(npu[-1].detach().cpu(), _make_params(dtype)[-1])  # no gradient: unchanged


@pytest.mark.parametrize("fused_cls, reference, kwargs", FORMULA_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(FORMULA_CASES)])
def test_matches_the_documented_formula(fused_cls, reference, kwargs):
    def make(params, **kw):
        return _FormulaReference(reference, params, **kw)

    cpu, npu = _run_side_by_side(fused_cls, make, kwargs, torch.float32)
    _assert_close(cpu, npu, torch.float32)


def test_a_step_makes_no_host_sync():
    for cls in (NpuFusedAdam, NpuFusedLamb, NpuFusedAdamP, NpuFusedBertAdam, NpuFusedSGD):
        params = [torch.nn.Parameter(_randn(16, 8)), torch.nn.Parameter(_randn(8))]
        opt = cls(params, lr=1e-3)
        for p in params:
            p.grad = torch.randn_like(p)
        torch.npu.synchronize()
        torch_npu.npu.reset_host_sync_stats()
        for _ in range(2):
            opt.step()
            opt.clip_grad_norm_fused_(1.0)
        assert torch_npu.npu.host_sync_count() == 0, (cls, torch_npu.npu.host_sync_stats())
        opt.zero_grad()


# -- zero_grad, clipping, state_dict, replaced gradients ----------------------


def test_zero_grad_zeroes_the_combined_gradients_and_refuses_set_to_none():
    params = [torch.nn.Parameter(_randn(3, 3)), torch.nn.Parameter(_randn(2))]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = NpuFusedAdam(params)
    opt.zero_grad()
    assert all(torch.count_nonzero(p.grad).item() == 0 for p in params)
    assert opt.get_combined_grads()[0].data_ptr() == params[0].grad.data_ptr()
    with pytest.raises(ValueError, match="set_to_none is not supported in fused optimizers"):
        opt.zero_grad(set_to_none=True)


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_clip_grad_norm_fused_matches_torch(norm_type):
    cpu = [torch.randn(4, 4, requires_grad=True), torch.randn(3, requires_grad=True)]
    npu = [c.detach().to("npu").requires_grad_() for c in cpu]
    for c, n in zip(cpu, npu):
        c.grad = torch.randn_like(c) * 3
        n.grad = c.grad.to("npu")
    expected = torch.nn.utils.clip_grad_norm_(cpu, 1.5, norm_type)
    total = NpuFusedSGD(npu, lr=0.1).clip_grad_norm_fused_(1.5, norm_type)
    torch.testing.assert_close(total.cpu(), expected)
    for c, n in zip(cpu, npu):
        torch.testing.assert_close(n.grad.cpu(), c.grad)
    assert NpuFusedSGD([torch.nn.Parameter(_randn(2))], lr=0.1).clip_grad_norm_fused_(1.0).item() == 0.0


@pytest.mark.parametrize("cls", [NpuFusedAdam, NpuFusedSGD, NpuFusedRMSpropTF, NpuFusedLamb])
def test_state_dict_round_trip(cls):
    kwargs = dict(lr=1e-2, momentum=0.9) if cls in (NpuFusedSGD, NpuFusedRMSpropTF) else dict(lr=1e-2)
    a = [torch.nn.Parameter(_randn(4, 3)), torch.nn.Parameter(_randn(5))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    opt_a = cls(a, **kwargs)
    grads = [[torch.randn_like(p) for p in a] for _ in range(6)]
    for step in range(3):
        for p, g in zip(a, grads[step]):
            p.grad = g.clone()
        opt_a.step()
    saved = copy.deepcopy(opt_a.state_dict())
    with torch.no_grad():
        for p, q in zip(b, a):
            p.copy_(q)
    opt_b = cls(b, **kwargs)
    opt_b.load_state_dict(saved)
    stale = cls(a, **kwargs)  # loading into an optimizer that stepped already
    for step in range(3, 6):
        for p, q, g in zip(a, b, grads[step]):
            p.grad, q.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    for p, q in zip(a, b):
        torch.testing.assert_close(q.detach().cpu(), p.detach().cpu())
    del stale


def test_reloaded_state_replaces_the_combined_one():
    p = torch.nn.Parameter(_randn(6))
    opt = NpuFusedAdam([p], lr=0.1)
    p.grad = torch.ones_like(p)
    opt.step()
    fresh_state = NpuFusedAdam([torch.nn.Parameter(_randn(6))], lr=0.1).state_dict()
    before = p.detach().cpu()
    opt.load_state_dict(fresh_state)  # no state: the next step is a first step again
    opt.step()
    # A first Adam step moves every coordinate by lr (the gradient's sign).
    torch.testing.assert_close(p.detach().cpu(), before - 0.1)


def test_gradients_replaced_by_the_program_are_followed():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)).to("npu")
    reference = copy.deepcopy(model)
    fused = NpuFusedAdam(model.parameters(), lr=1e-2)
    plain = torch.optim.Adam(reference.parameters(), lr=1e-2)
    for step in range(4):
        x = torch.randn(8, 4, device="npu")
        for m, opt in ((model, fused), (reference, plain)):
            m.zero_grad(set_to_none=True)  # PyTorch's default: new gradient tensors every step
            m(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-5, atol=1e-6)


def test_a_parameter_that_gets_its_first_gradient_late_is_stepped():
    p, q = torch.nn.Parameter(_randn(3)), torch.nn.Parameter(_randn(3))
    p_ref, q_ref = (torch.nn.Parameter(t.detach().cpu()) for t in (p, q))
    fused, plain = NpuFusedSGD([p, q], lr=0.1, momentum=0.5), torch.optim.SGD([p_ref, q_ref], lr=0.1, momentum=0.5)
    # torch_npu skips the momentum update of p at the second step here (see Note [First momentum of a fused SGD]).
    p.grad, p_ref.grad = torch.ones(3, device="npu"), torch.ones(3)
    fused.step()
    plain.step()
    q.grad, q_ref.grad = torch.ones(3, device="npu"), torch.ones(3)
    fused.step()
    plain.step()
    torch.testing.assert_close(q.detach().cpu(), q_ref.detach())
    torch.testing.assert_close(p.detach().cpu(), p_ref.detach())


def test_closure_runs_with_grad_enabled():
    p = torch.nn.Parameter(_randn(3))
    opt = NpuFusedSGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = p.pow(2).sum()
        loss.backward()
        return loss

    before = p.detach().cpu()
    loss = opt.step(closure)
    torch.testing.assert_close(loss.cpu(), before.pow(2).sum())
    torch.testing.assert_close(p.detach().cpu(), before * 0.8)


# -- bad inputs ------------------------------------------------------------------


@pytest.mark.parametrize("make, error, message", [
    (lambda p: NpuFusedAdam(p, lr=-1), ValueError, "Invalid learning rate: -1"),
    (lambda p: NpuFusedAdam(p, betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0: 1.0"),
    (lambda p: NpuFusedAdamW(p, betas=(0.9, -0.1)), ValueError, "Invalid beta parameter at index 1: -0.1"),
    (lambda p: NpuFusedAdam(p, betas=(0.9,)), ValueError, "Invalid betas"),
    (lambda p: NpuFusedAdam(p, eps=-1e-8), ValueError, "Invalid epsilon value"),
    (lambda p: NpuFusedSGD(p, lr=0.1, momentum=-1), ValueError, "Invalid momentum value: -1"),
    (lambda p: NpuFusedSGD(p, lr=0.1, nesterov=True), ValueError, "Nesterov momentum requires a momentum"),
    (lambda p: NpuFusedSGD(p), ValueError, "required optimization parameter lr"),  # as torch_npu
    (lambda p: NpuFusedAdadelta(p, rho=1.5), ValueError, "Invalid rho value: 1.5"),
    (lambda p: NpuFusedRMSprop(p, alpha=-0.5), ValueError, "Invalid alpha value"),
    (lambda p: NpuFusedRMSpropTF(p, weight_decay=-1), ValueError, "Invalid weight_decay value"),
    (lambda p: NpuFusedLamb(p, betas=(0.9, 1.0)), ValueError, "Invalid beta parameter at index 1"),
    (lambda p: NpuFusedAdamP(p, lr=-0.1), ValueError, "Invalid learning rate"),
    (lambda p: NpuFusedBertAdam(p, lr=0.1, warmup=2.0), ValueError, "Invalid warmup: 2.0"),
    (lambda p: NpuFusedBertAdam(p, lr=0.1, schedule="cosine"), ValueError, "Invalid schedule parameter: cosine"),
    (lambda p: NpuFusedBertAdam(p, lr=0.1, b2=1.0), ValueError, "Invalid b2 parameter: 1.0"),
])
def test_bad_hyper_parameters_raise(make, error, message):
    with pytest.raises(error, match=message.replace("(", "\\(").replace(")", "\\)")):
        make([torch.nn.Parameter(_randn(2))])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_parameters_of_other_dtypes_raise_torch_npus_type_error(dtype):
    p = torch.nn.Parameter(torch.ones(3, dtype=dtype, device="npu"))
    p.grad = torch.ones_like(p)
    opt = NpuFusedAdam([p])
    with pytest.raises(TypeError, match=f"must be either float32 or float16, but received {dtype}"):
        opt.step()


def test_sparse_gradients_raise():
    p = torch.nn.Parameter(_randn(4, 2))
    p.grad = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.ones(1, 2), (4, 2)).to("npu")
    with pytest.raises(RuntimeError, match="NpuFusedAdam does not support sparse gradients"):
        NpuFusedAdam([p]).step()


def test_parameters_sharing_a_storage_raise():
    base = _randn(8)
    views = [torch.nn.Parameter(base[:4]), torch.nn.Parameter(base[4:])]
    for v in views:
        v.grad = torch.ones_like(v)
    with pytest.raises(RuntimeError, match="parameters with storages of their own, but parameters 0 and 1"):
        NpuFusedAdam(views).step()


def test_parameters_on_the_cpu_raise():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    with pytest.raises(RuntimeError, match="must be on NPU, got cpu"):
        NpuFusedSGD([p], lr=0.1).step()


def test_error_suffix_is_torch_npus(monkeypatch):
    from torch_npu.utils._error_code import ErrCode, pta_error

    monkeypatch.delenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", raising=False)
    assert pta_error(ErrCode.VALUE).endswith(") ERR00003 PTA invalid value")
    assert "(PID:" in pta_error(ErrCode.TYPE) and "ERR00002 PTA invalid type" in pta_error(ErrCode.TYPE)
    monkeypatch.setenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "1")
    assert pta_error(ErrCode.VALUE) == ""
    monkeypatch.setenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "yes")  # never an error of its own
    assert pta_error(ErrCode.VALUE) == ""
    with pytest.raises(ValueError, match="Invalid learning rate: -1$"):  # nothing after the message
        NpuFusedAdam([torch.nn.Parameter(_randn(2))], lr=-1)


def test_import_surface():
    assert "torch_npu.optim" in sys.modules and torch_npu.optim.NpuFusedAdam is NpuFusedAdam
    assert sorted(torch_npu.optim.__all__)[0] == "NpuFusedAdadelta" and len(torch_npu.optim.__all__) == 10
    with pytest.raises(AttributeError):
        torch_npu.optim.NoSuchOptimizer


# -- _DistributedMuon ------------------------------------------------------------


def test_distributed_muon_without_a_process_group_is_muon():
    from torch_npu.optim import _DistributedMuon

    torch.manual_seed(3)
    weights = [torch.randn(6, 4), torch.randn(3, 5)]
    reference = [torch.nn.Parameter(w.clone()) for w in weights]
    params = [torch.nn.Parameter(w.to("npu")) for w in weights]
    reference_opt = torch.optim.Muon(reference, lr=0.05, adjust_lr_fn="match_rms_adamw")
    opt = _DistributedMuon(params, lr=0.05, adjust_lr_fn="match_rms_adamw")
    for _ in range(3):
        for r, p in zip(reference, params):
            r.grad = torch.randn_like(r)
            p.grad = r.grad.to("npu")
        reference_opt.step()
        opt.step()
    for r, p in zip(reference, params):
        torch.testing.assert_close(p.detach().cpu(), r.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda p: torch_npu.optim._DistributedMuon([p], lr=-1), "Learning rate should be >= 0 but is: -1"),
    (lambda p: torch_npu.optim._DistributedMuon([p], momentum=-1), "momentum should be >= 0"),
    (lambda p: torch_npu.optim._DistributedMuon([p], adjust_lr_fn="x"), "Adjust learning rate function x"),
    (lambda p: torch_npu.optim._DistributedMuon([torch.nn.Parameter(_randn(3))]), "only supports 2D parameters"),
])
def test_distributed_muon_bad_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make(torch.nn.Parameter(_randn(2, 2)))


@pytest.mark.subprocess
def test_distributed_muon_over_shards_matches_muon(tmp_path, monkeypatch):
    import torch.multiprocessing as mp

    import optim_dist_workers

    monkeypatch.setenv("NPU_SIM_DEVICE_COUNT", "2")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    monkeypatch.delenv("NPU_SIM_TASK_DELAY_US", raising=False)
    mp.spawn(optim_dist_workers.distributed_muon_matches_muon, args=(2, str(tmp_path / "store")), nprocs=2, join=True)
