"""Ops that used to kill the process, and the complex-number basics around them.

Each group runs in a fresh interpreter: a crash (SIGSEGV from a stack overflow
or a write past device memory) then fails one test instead of killing pytest.
Every call is made on CPU and on npu and compared: values, shape, dtype (and
conj bit resolved), and gradients where the call is differentiable.

Formerly crashing (OpInfo float32 samples): fft.ifft, fft.hfft, fft.hfft2,
fft.hfftn, fft.ihfft, fft.ihfft2, fft.ihfftn, linalg.eigvals, and the
backward of polar and nn.functional.embedding_bag. The cause was a copy of a
conj tensor recursing through the Conjugate fallback (Note [Copies resolve
conj and neg bits themselves]); complex views were built with the wrong dtype
(Note [Views that change dtype or bits]).
"""

from __future__ import annotations

import signal

import pytest

from conftest import run_py

# Shared by every group: check(what, fn, *inputs, grad=False) runs fn on CPU
# copies and on npu copies of the inputs and compares the results (and the
# gradients of a real scalar built from them).
PRELUDE = r'''
import torch, torch_npu

torch.manual_seed(0)
FAILED = []


def to(x, dev, grad=False):
    if isinstance(x, torch.Tensor):
        y = x.detach().to(dev)
        if grad and (y.is_floating_point() or y.is_complex()):
            y.requires_grad_(True)
        return y
    if isinstance(x, (list, tuple)):
        return type(x)(to(e, dev, grad) for e in x)
    if isinstance(x, dict):
        return {k: to(v, dev, grad) for k, v in x.items()}
    return x


def same(what, a, b):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{what}: {b!r} vs {a!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(f"{what}[{i}]", x, y)
        return
    if not isinstance(a, torch.Tensor):
        assert a == b, f"{what}: {b!r} != {a!r}"
        return
    assert isinstance(b, torch.Tensor), f"{what}: npu returned {type(b)}"
    assert b.device.type == "npu", f"{what}: result on {b.device}"
    assert b.dtype == a.dtype, f"{what}: dtype {b.dtype}, CPU gives {a.dtype}"
    assert b.shape == a.shape, f"{what}: shape {tuple(b.shape)}, CPU gives {tuple(a.shape)}"
    torch.testing.assert_close(b.detach().cpu().resolve_conj().resolve_neg(),
                               a.detach().resolve_conj().resolve_neg(),
                               atol=1e-4, rtol=1e-4, equal_nan=True, msg=lambda m: f"{what}: {m}")


def loss_of(out):
    outs = out if isinstance(out, (list, tuple)) else (out,)
    total = 0
    for o in outs:
        if isinstance(o, torch.Tensor) and o.requires_grad:
            # real and imag (conj/neg views of them included) both reach the loss
            total = total + (o.real.sum() + 0.5 * o.imag.sum() if o.is_complex() else o.sum())
    return total


def run(dev, fn, inputs, grad):
    ins = [to(x, dev, grad) for x in inputs]
    out = fn(*ins)
    grads = None
    if grad:
        flat = [v for x in ins for v in (x.values() if isinstance(x, dict) else [x])]
        leaves = [x for x in flat if isinstance(x, torch.Tensor) and x.requires_grad]
        grads = torch.autograd.grad(loss_of(out), leaves, allow_unused=True)
    return out, grads


def check(what, fn, *inputs, grad=False):
    try:
        cpu_out, cpu_grads = run("cpu", fn, inputs, grad)
        npu_out, npu_grads = run("npu", fn, inputs, grad)
        torch.npu.synchronize()
        same(what, cpu_out, npu_out)
        if grad:
            same(what + " grad", cpu_grads, npu_grads)
    except Exception as e:  # collected: one report names every failing call
        FAILED.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def check_raises(what, fn, *inputs):
    """Both devices raise RuntimeError (and the npu device stays usable)."""
    for dev in ("cpu", "npu"):
        try:
            fn(*[to(x, dev) for x in inputs])
            torch.npu.synchronize()
        except RuntimeError:
            continue
        FAILED.append(f"{what}: no error on {dev}")
    x = torch.ones(3, device="npu")
    assert (x + 1).sum().item() == 6


def finish():
    torch.npu.synchronize()
    if FAILED:
        print("FAILED:\n" + "\n".join(FAILED))
        raise SystemExit(1)
    print("ALL OK")
'''


def run_group(body: str, timeout: float = 240) -> None:
    p = run_py(PRELUDE + body + "\nfinish()\n", timeout=timeout)
    if p.returncode < 0:
        pytest.fail(f"killed by {signal.Signals(-p.returncode).name}\nstdout:\n{p.stdout}\n"
                    f"stderr:\n{p.stderr[-4000:]}")
    assert p.returncode == 0 and "ALL OK" in p.stdout, (
        f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr[-4000:]}")


def test_the_issue_call_does_not_crash():
    run_group('''
x = torch.randn(5, 6, 7)
check("hfft(n=10, dim=1, ortho)", lambda t: torch.fft.hfft(t, n=10, dim=1, norm="ortho"), x)
check("hfft(n=10, dim=1, ortho) grad",
      lambda t: torch.fft.hfft(t, n=10, dim=1, norm="ortho"), x, grad=True)
''')


def test_conj_and_neg_views_copy_and_compute():
    run_group('''
z = torch.complex(torch.randn(4, 3), torch.randn(4, 3))
w = torch.complex(torch.randn(3, 2), torch.randn(3, 2))
r = torch.randn(4, 3)
check("conj to cpu", lambda t: t.conj(), z)
check("conj + 0", lambda t: t.conj() + 0, z)
check("conj clone", lambda t: t.conj().clone(), z)
check("resolve_conj", lambda t: t.conj().resolve_conj(), z)
check("conj_physical", lambda t: torch.conj_physical(t), z)
check("conj of a slice", lambda t: t[1:, ::2].conj() * 2, z)
check("mm with conj operand", lambda a, b: torch.mm(a.conj(), b), z, w)
check("mm with conj operands", lambda a, b: torch.mm(a, b.conj()).conj(), z, w)
check("neg view to cpu", lambda t: torch._neg_view(t), r)
check("neg view + 1", lambda t: torch._neg_view(t) + 1, r)
check("neg view mm", lambda a: torch.mm(torch._neg_view(a), a.t()), r)
check("imag of conj (neg view)", lambda t: t.conj().imag, z)
check("conj grad", lambda t: (t.conj() * t).sum(), z, grad=True)

# copies in every direction with a conj source or destination
zc = z.conj()
zn = z.to("npu")
cpu_dst = torch.empty_like(z)
cpu_dst.copy_(zn.conj())
same("cpu.copy_(npu.conj())", zc.resolve_conj(), cpu_dst.to("npu"))
npu_dst = torch.empty(4, 3, dtype=torch.complex64, device="npu")
npu_dst.copy_(zc)
same("npu.copy_(cpu.conj())", zc.resolve_conj(), npu_dst)
npu_dst.copy_(zn.conj())
same("npu.copy_(npu.conj())", zc.resolve_conj(), npu_dst)
npu_conj_dst = torch.zeros(4, 3, dtype=torch.complex64, device="npu").conj()
npu_conj_dst.copy_(zn)
same("npu.conj().copy_(npu)", z, npu_conj_dst)
same("conj().to(npu)", zc.resolve_conj(), zc.to("npu"))
''')


def test_complex_construction_and_views():
    run_group('''
a, b = torch.randn(3, 4), torch.randn(3, 4)
z = torch.complex(torch.randn(3, 4), torch.randn(3, 4))
f = torch.randn(3, 4, 2)
check("complex", torch.complex, a, b)
check("complex grad", torch.complex, a, b, grad=True)
check("complex float64", torch.complex, a.double(), b.double())
check("view_as_complex", torch.view_as_complex, f)
check("view_as_complex grad", torch.view_as_complex, f, grad=True)
check("view_as_complex of a row", lambda t: torch.view_as_complex(t[1]), f)
check("view_as_complex then op", lambda t: torch.view_as_complex(t) * 2j, f)
check("view_as_real", torch.view_as_real, z)
check("view_as_real grad", torch.view_as_real, z, grad=True)
check("view_as_real of a slice", lambda t: torch.view_as_real(t[1:, 1:3]), z)
check("view_as_real then op", lambda t: torch.view_as_real(t).sum(-1), z)
def write_through_real_view(t):
    t = t.clone()  # CPU inputs are the caller's own tensors
    torch.view_as_real(t)[..., 1].mul_(2)
    return t
check("view_as_real writes through", write_through_real_view, z)
check("round trip", lambda t: torch.view_as_complex(torch.view_as_real(t)), z)
check("real / imag", lambda t: (t.real, t.imag), z)
check("view(float32)", lambda t: t.view(torch.float32), z)
check("view(complex64)", lambda t: t.view(torch.complex64), torch.randn(3, 4))
check("abs / angle", lambda t: (t.abs(), t.angle()), z)
check("complex matmul", lambda t: t @ t.T, z)
# an odd offset cannot be viewed as complex, on any device
check_raises("view_as_complex at an odd offset",
             lambda t: torch.view_as_complex(t.flatten()[1:7].view(3, 2)), f)
''')


def test_fft_family():
    run_group('''
x = torch.randn(5, 6, 7)
z = torch.complex(torch.randn(5, 6, 7), torch.randn(5, 6, 7))
fns = {
    "fft": torch.fft.fft, "ifft": torch.fft.ifft, "rfft": torch.fft.rfft,
    "irfft": torch.fft.irfft, "hfft": torch.fft.hfft, "ihfft": torch.fft.ihfft,
}
for name, fn in fns.items():
    inputs = [("real", x)] if name in ("rfft", "ihfft") else [("real", x), ("complex", z)]
    for kind, t in inputs:
        for kw in ({}, {"n": 10}, {"n": 4, "dim": 1}, {"dim": 0, "norm": "ortho"},
                   {"n": 10, "dim": 1, "norm": "forward"}, {"norm": "backward"}):
            what = f"{name}({kind}, {kw})"
            check(what, lambda u, fn=fn, kw=kw: fn(u, **kw), t)
            check(what + " grad", lambda u, fn=fn, kw=kw: fn(u, **kw), t, grad=True)
for name, fn in {"fft2": torch.fft.fft2, "ifft2": torch.fft.ifft2, "fftn": torch.fft.fftn,
                 "ifftn": torch.fft.ifftn, "rfft2": torch.fft.rfft2, "irfft2": torch.fft.irfft2,
                 "rfftn": torch.fft.rfftn, "irfftn": torch.fft.irfftn,
                 "hfft2": torch.fft.hfft2, "hfftn": torch.fft.hfftn,
                 "ihfft2": torch.fft.ihfft2, "ihfftn": torch.fft.ihfftn}.items():
    for kw in ({}, {"s": (4, 6)}, {"dim": (0, 2), "norm": "ortho"}):
        check(f"{name}({kw})", lambda u, fn=fn, kw=kw: fn(u, **kw), x)
        check(f"{name}({kw}) grad", lambda u, fn=fn, kw=kw: fn(u, **kw), x, grad=True)
check("fftshift(fft)", lambda u: torch.fft.fftshift(torch.fft.fft(u)), x)
check("ifft of 1-d real", torch.fft.ifft, torch.randn(8))
''', timeout=300)


def test_linalg_eig_and_eigvals():
    run_group('''
a = torch.randn(4, 4)
batch = torch.randn(3, 5, 5)
check("eig", torch.linalg.eig, a)
check("eig batched", torch.linalg.eig, batch)
check("eigvals", torch.linalg.eigvals, a)
check("eigvals batched", torch.linalg.eigvals, batch)
check("eigvals grad", torch.linalg.eigvals, a, grad=True)
sym = a + a.T
check("eigvals of symmetric", torch.linalg.eigvals, sym)
check("eig of complex", torch.linalg.eig, torch.complex(a, a.T))
''')


def test_polar_and_embedding_bag_backward():
    run_group('''
absv, ang = torch.rand(3, 4) + 0.1, torch.randn(3, 4)
check("polar", torch.polar, absv, ang)
check("polar grad", torch.polar, absv, ang, grad=True)
weight = torch.randn(10, 3)
idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
offsets = torch.tensor([0, 4])
for mode in ("sum", "mean", "max"):
    check(f"embedding_bag {mode}",
          lambda w, i, o, mode=mode: torch.nn.functional.embedding_bag(i, w, o, mode=mode),
          weight, idx, offsets)
    check(f"embedding_bag {mode} grad",
          lambda w, i, o, mode=mode: torch.nn.functional.embedding_bag(i, w, o, mode=mode),
          weight, idx, offsets, grad=True)
check("embedding_bag per_sample_weights grad",
      lambda w, i, o, p: torch.nn.functional.embedding_bag(i, w, o, mode="sum",
                                                            per_sample_weights=p),
      weight, idx, offsets, torch.rand(8), grad=True)
''')


def test_opinfo_samples_of_the_formerly_crashing_ops():
    """Every float32 OpInfo sample of the ten ops, forward and backward."""
    run_group('''
from torch.testing._internal.common_methods_invocations import op_db
names = {"fft.ifft", "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ihfft", "fft.ihfft2",
         "fft.ihfftn", "linalg.eigvals", "polar", "nn.functional.embedding_bag"}
seen = set()
for op in op_db:
    if op.name not in names or op.variant_test_name:
        continue
    seen.add(op.name)
    grad = op.supports_autograd
    for i, s in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=grad)):
        # kwargs go last, as a dict (tensors in it move to the device too)
        check(f"{op.name} sample {i}", lambda *t, op=op: op(*t[:-1], **t[-1]),
              s.input, *s.args, s.kwargs, grad=grad)
assert seen == names, names - seen
''', timeout=400)


def test_out_kernels_that_resize_on_the_synchronous_path():
    """lstsq has no meta kernel: its out kernel runs synchronously and resizes."""
    run_group('''
a, b = torch.randn(5, 3), torch.randn(5, 4)
check("lstsq", torch.linalg.lstsq, a, b)
check("lstsq batched", torch.linalg.lstsq, torch.randn(2, 4, 4), torch.randn(2, 4, 1))
for first in (0, 5, 30):  # empty, too small, too large: resized like on CPU
    def with_out(x, y, first=first):
        dev = x.device
        outs = (torch.empty(first, device=dev), torch.empty(0, device=dev),
                torch.empty(0, dtype=torch.long, device=dev), torch.empty(0, device=dev))
        r = torch.linalg.lstsq(x, y, out=outs)
        assert all(p is q for p, q in zip(r, outs))
        return outs
    check(f"lstsq out= of {first} elements", with_out, a, b)
check("nonzero", lambda t: torch.nonzero(t > 0), a)
check("nonzero out=", lambda t: torch.nonzero(t > 0, out=torch.empty(3, 2, dtype=torch.long,
                                                                 device=t.device)), a)
''')


def test_resize_while_a_copy_into_the_tensor_is_queued():
    """A queued copy writes the shape and memory its destination had at enqueue."""
    run_group('''
for n in (3, 6, 8, 40):
    check(f"clone().resize_({n})", lambda t, n=n: t.clone().resize_(n)[:min(n, 6)],
          torch.arange(6.).reshape(2, 3))
''')
