"""Autograd on npu: backward through matmul, elementwise ops, reductions,
indexing, activations and torch.nn.functional losses gives the same gradients
as on cpu; a small MLP trained with Adam for 200 steps reaches the same loss as
the same model trained on cpu from the same seed."""

import copy

import pytest
import torch
import torch.nn.functional as F


def grads_on(device, fn, *inputs):
    leaves = [x.detach().clone().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*leaves)
    out.backward()
    return out.detach().cpu(), [l.grad.cpu() if l.grad is not None else None for l in leaves]


def check_grads(fn, *inputs, atol=1e-5, rtol=1e-4):
    out_c, g_c = grads_on("cpu", fn, *inputs)
    out_n, g_n = grads_on("npu", fn, *inputs)
    torch.testing.assert_close(out_n, out_c, atol=atol, rtol=rtol)
    for a, b in zip(g_n, g_c):
        if b is None:
            assert a is None
        else:
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


@pytest.fixture
def ab():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 6, generator=g), torch.randn(6, 4, generator=g)


@pytest.mark.parametrize("name,fn", [
    ("matmul", lambda a, b: (a @ b).sum()),
    ("elementwise", lambda a, b: (a.sin() * a.exp() / (1 + a * a)).sum() + (b ** 3).mean()),
    ("reductions", lambda a, b: a.max(dim=1).values.sum() + a.norm() + b.var() + a.logsumexp(0).sum()),
    ("indexing", lambda a, b: a[1:5, ::2].sum() + a[torch.tensor([0, 3, 3], device=a.device)].pow(2).sum()
        + b.gather(0, torch.tensor([[0, 1, 2, 3]], device=b.device)).sum()),
    ("index_put", lambda a, b: a.index_put((torch.tensor([0, 2], device=a.device),), b[:2, :1].expand(2, 6) * 2).sum()),
    ("activations", lambda a, b: (F.relu(a) + F.gelu(a) + F.silu(a) + torch.tanh(a) + torch.sigmoid(a)
        + F.leaky_relu(a, 0.1) + F.softplus(a)).sum()),
    ("softmax", lambda a, b: (F.softmax(a, dim=1) * F.log_softmax(a, dim=0)).sum()),
    ("views", lambda a, b: (a.t().reshape(12, 4) @ b.t().reshape(4, 6)).sum()),
    ("broadcast", lambda a, b: (a.unsqueeze(2) * b[:, :1].t().unsqueeze(0)).sum()),
    ("layer_norm", lambda a, b: F.layer_norm(a, (6,)).pow(2).sum()),
])
def test_backward_matches_cpu(ab, name, fn):
    check_grads(fn, *ab)


@pytest.mark.parametrize("loss", ["mse", "l1", "smooth_l1", "cross_entropy", "nll", "bce_logits", "kl_div", "huber"])
def test_loss_gradients_match_cpu(loss):
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(10, 5, generator=g)
    target_f = torch.randn(10, 5, generator=g)
    labels = torch.randint(0, 5, (10,), generator=g)
    probs = torch.rand(10, 5, generator=g)

    def fn(x, tf, lab, p):
        if loss == "mse":
            return F.mse_loss(x, tf)
        if loss == "l1":
            return F.l1_loss(x, tf)
        if loss == "smooth_l1":
            return F.smooth_l1_loss(x, tf)
        if loss == "huber":
            return F.huber_loss(x, tf, delta=0.5)
        if loss == "cross_entropy":
            return F.cross_entropy(x, lab, label_smoothing=0.1)
        if loss == "nll":
            return F.nll_loss(F.log_softmax(x, dim=1), lab)
        if loss == "bce_logits":
            return F.binary_cross_entropy_with_logits(x, p)
        return F.kl_div(F.log_softmax(x, dim=1), p.softmax(1), reduction="batchmean")

    check_grads(fn, logits, target_f, labels, probs)


def test_grad_accumulates_and_zeroes():
    w = torch.ones(3, device="npu", requires_grad=True)
    (w * 2).sum().backward()
    (w * 3).sum().backward()
    assert w.grad.tolist() == [5.0, 5.0, 5.0]
    w.grad.zero_()
    assert w.grad.sum().item() == 0


def test_no_grad_and_detach():
    w = torch.ones(3, device="npu", requires_grad=True)
    with torch.no_grad():
        y = w * 2
    assert not y.requires_grad
    z = (w * 2).detach()
    assert not z.requires_grad and z.device.type == "npu"


def test_backward_on_side_stream():
    s = torch.npu.Stream()
    w = torch.randn(5, 5).npu().requires_grad_()
    with torch.npu.stream(s):
        loss = (w @ w).sum()
        loss.backward()
    s.synchronize()
    w_c = w.detach().cpu().requires_grad_()
    (w_c @ w_c).sum().backward()
    torch.testing.assert_close(w.grad.cpu(), w_c.grad, atol=1e-5, rtol=1e-4)


def _train(device, model, xs, ys, steps=200):
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xs, ys = xs.to(device), ys.to(device)
    losses = []
    for step in range(steps):
        i = (step * 16) % xs.shape[0]
        xb, yb = xs[i:i + 16], ys[i:i + 16]
        opt.zero_grad()
        # Written out rather than F.mse_loss, which test_loss_gradients_match_cpu covers.
        loss = ((model(xb) - yb) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu(), [p.detach().cpu() for p in model.parameters()]


@pytest.mark.timeout(180)
def test_mlp_adam_200_steps_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
    )
    xs = torch.randn(128, 8)
    ys = (xs[:, :1] * 2 - xs[:, 1:2].sin()) + 0.05 * torch.randn(128, 1)
    cpu_losses, cpu_params = _train("cpu", copy.deepcopy(model), xs, ys)
    npu_losses, npu_params = _train("npu", copy.deepcopy(model), xs, ys)
    assert cpu_losses[-1] < cpu_losses[0] / 4  # it actually learned
    torch.testing.assert_close(npu_losses, cpu_losses, atol=1e-4, rtol=1e-3)
    for a, b in zip(npu_params, cpu_params):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
