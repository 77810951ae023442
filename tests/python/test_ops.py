"""Ops on npu tensors: every op runs as a task on the current stream and gives
the same result as on cpu — elementwise, reductions, matmul, data-dependent
shapes (nonzero, masked_select, unique), host reads that wait for the work
(item, tolist, print/repr, ``if t.sum() > 0``), views, in-place ops, ``out=``
variants (including resizing a wrong-size out), type promotion, 0-dim and
empty tensors."""

import pytest
import torch

from conftest import read_f32, run_py_ok


def npu(t, device=0):
    return t.to(f"npu:{device}")


def assert_same(npu_result, cpu_result, **kw):
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype
    assert npu_result.shape == cpu_result.shape
    torch.testing.assert_close(npu_result.cpu(), cpu_result, **kw)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b,
    lambda a, b: a * b - b / 3,
    lambda a, b: torch.where(a > b, a, b),
    lambda a, b: a.exp().log1p().sin(),
    lambda a, b: torch.clamp(a, -0.5, 0.5),
    lambda a, b: a.sum(),
    lambda a, b: a.mean(dim=1),
    lambda a, b: a.max(dim=0).values,
    lambda a, b: a.argmax(dim=1),
    lambda a, b: a.cumsum(0),
    lambda a, b: a @ b.t(),
    lambda a, b: torch.cat([a, b], dim=1),
    lambda a, b: torch.stack([a, b]).std(dim=0),
    lambda a, b: a.sort(dim=1).values,
    lambda a, b: torch.topk(a, 2, dim=1).indices,
    lambda a, b: torch.softmax(a, dim=-1),
    lambda a, b: a[a > 0],
    lambda a, b: a.flip(0).roll(2, 1),
], ids=lambda f: f.__code__.co_firstlineno)
def test_op_matches_cpu(data, fn):
    a, b = data
    assert_same(fn(npu(a), npu(b)), fn(a, b))


def test_ops_on_device_1(data):
    a, b = data
    r = npu(a, 1) @ npu(b, 1).t() + 1
    assert r.device == torch.device("npu:1")
    assert_same(r, a @ b.t() + 1)


@pytest.mark.parametrize("fn", [
    lambda t: torch.nonzero(t > 0),
    lambda t: torch.masked_select(t, t > 0.3),
    lambda t: torch.unique(torch.round(t)),
    lambda t: torch.unique(torch.round(t), return_counts=True)[1],
    lambda t: t[t.abs() < 0.5],
])
def test_data_dependent_shapes(data, fn):
    a, _ = data
    x = npu(a)
    y = x * 2  # queued before: the data-dependent op must see it
    assert_same(fn(y), fn(a * 2))


def test_data_dependent_shape_after_blocked_stream(gate):
    x = torch.zeros(10, device="npu")
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    x[3] = 1.0
    x[7] = 2.0
    g.release()  # nonzero must wait for the writes, whatever the timing
    assert torch.nonzero(x).flatten().tolist() == [3, 7]


def test_host_reads_wait_for_queued_work(gate, capsys):
    x = torch.zeros(4, device="npu")
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    x.add_(2)
    s = x.sum()
    assert read_f32(x) == 0.0
    g.release()
    assert s.item() == 8.0
    assert x.tolist() == [2.0] * 4
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))
    print(x)
    assert "2., 2., 2., 2." in capsys.readouterr().out
    assert "device='npu:0'" in repr(x)
    if x.sum() > 0:
        branch = True
    else:
        branch = False
    assert branch
    assert bool((x == 2).all())
    assert int(x[0]) == 2 and float(x[1]) == 2.0


def test_host_read_without_explicit_sync_chain():
    x = torch.ones(1000, device="npu")
    for _ in range(50):
        x = x * 1.01
    assert x[0].item() == pytest.approx(1.01 ** 50, rel=1e-5)


def test_views_share_memory(data):
    a, _ = data
    x = npu(a.clone())
    v = x.view(30)
    s = x[1:4, ::2]
    t = x.t()
    e = x[0:1].expand(3, 5)
    st = x.as_strided((2, 2), (5, 1), 1)
    assert v.data_ptr() == x.data_ptr()
    assert t.data_ptr() == x.data_ptr()
    assert_same(s, a[1:4, ::2])
    assert_same(t.contiguous(), a.t().contiguous())
    assert_same(e, a[0:1].expand(3, 5))
    assert_same(st, a.as_strided((2, 2), (5, 1), 1))
    x.zero_()
    assert v.abs().sum().item() == 0 and s.abs().sum().item() == 0


def test_multi_output_views(data):
    a, _ = data
    x = npu(a)
    for got, want in zip(x.unbind(0), a.unbind(0)):
        assert_same(got, want)
    for got, want in zip(x.split(2, dim=1), a.split(2, dim=1)):
        assert_same(got, want)
    for got, want in zip(x.chunk(3), a.chunk(3)):
        assert_same(got, want)
    parts = x.chunk(3)
    assert parts[1].data_ptr() == x.data_ptr() + 2 * 5 * 4


def test_write_through_view_is_visible_in_base():
    x = torch.zeros(3, 4, device="npu")
    x[:, 1] = 5.0
    x.t()[2].fill_(7.0)
    x.view(12)[0] = 1.0
    want = torch.zeros(3, 4)
    want[:, 1] = 5.0
    want[:, 2] = 7.0
    want[0, 0] = 1.0
    assert torch.equal(x.cpu(), want)


def test_inplace_ops_return_self(data):
    a, b = data
    x, y = npu(a.clone()), npu(b)
    r = x.add_(y)
    assert r is x
    x.mul_(2).sub_(1).clamp_(min=0)
    assert_same(x, ((a + b) * 2 - 1).clamp(min=0))
    x.index_fill_(0, torch.tensor([1, 2], device="npu"), 0.5)
    x.masked_fill_(x > 2, -1)
    want = ((a + b) * 2 - 1).clamp(min=0)
    want.index_fill_(0, torch.tensor([1, 2]), 0.5)
    want.masked_fill_(want > 2, -1)
    assert_same(x, want)


def test_inplace_on_non_contiguous_view(data):
    a, _ = data
    x = npu(a.clone())
    x.t()[1:3].mul_(10)
    want = a.clone()
    want.t()[1:3].mul_(10)
    assert_same(x, want)


@pytest.mark.parametrize("fn", [
    lambda t: t.transpose_(0, 1),
    lambda t: t.t_(),
    lambda t: t.unsqueeze_(1),
    lambda t: t.squeeze_(),
    lambda t: t.swapdims_(0, 1),
    lambda t: t.as_strided_((5, 3), (1, 5)),
], ids=lambda f: f.__code__.co_firstlineno)
def test_inplace_metadata_ops_change_metadata_not_data(data, fn, recwarn):
    # These ops sit beside the structured ops that the op path takes over
    # (Note [Structured ops take the op path]); they must keep PyTorch's own
    # kernels: the op path would resize the tensor instead (and warn).
    a, _ = data
    x = npu(a.clone())
    want = fn(a.clone())
    got = fn(x)
    assert got is x
    assert x.stride() == want.stride()
    assert_same(x, want)
    assert not [w for w in recwarn if "resized" in str(w.message)]


def test_structured_ops_and_their_inplace_variants_take_the_op_path():
    import torch_npu
    before = torch_npu.npu.host_sync_count()
    x = torch.randn(16, device="npu")
    y = (x + 1).mul(3).pow(2)
    y.add_(x).sub_(1)
    z = torch.where(y > 1, y, x).clamp(0, 5)
    assert torch_npu.npu.host_sync_count() == before
    xc = x.cpu()
    yc = (xc + 1).mul(3).pow(2)
    yc.add_(xc).sub_(1)
    assert_same(z, torch.where(yc > 1, yc, xc).clamp(0, 5))
    dump = torch._C._dispatch_dump("aten::add.Tensor")
    assert any(line.startswith("PrivateUse1:") for line in dump.splitlines())


def test_functional_results_are_computed_in_place_of_the_output():
    # relu has no out= variant: its CPU kernel allocates its result in the
    # output's device memory (Note [Results computed in place of the output]).
    from torch_npu import _C
    x = torch.randn(1000, device="npu")
    torch.relu(x)  # first call: plan and metadata
    torch.npu.synchronize()
    before = _C._testing_resultPlacement()
    y = torch.relu(x)
    torch.npu.synchronize()
    after = _C._testing_resultPlacement()
    assert after["placed"] == before["placed"] + 1
    assert after["copied"] == before["copied"]
    assert_same(y, torch.relu(x.cpu()))


def test_multi_output_functional_results_are_copied(data):
    # Two results of one size may be allocated in either order, so only
    # single-output ops are offered their output's memory.
    from torch_npu import _C
    a, _ = data
    x = npu(a)
    before = _C._testing_resultPlacement()
    mn, mx = torch.aminmax(x, dim=1)
    torch.npu.synchronize()
    want_mn, want_mx = torch.aminmax(a, dim=1)
    assert_same(mn, want_mn)
    assert_same(mx, want_mx)
    assert _C._testing_resultPlacement()["placed"] == before["placed"]


def test_out_variants(data):
    a, b = data
    out = torch.empty(6, 5, device="npu")
    r = torch.add(npu(a), npu(b), out=out)
    assert r is out
    assert_same(out, a + b)
    mm = torch.empty(6, 6, device="npu")
    torch.mm(npu(a), npu(b).t(), out=mm)
    assert_same(mm, a @ b.t())


def test_out_of_wrong_size_is_resized(data):
    a, b = data
    out = torch.empty(3, device="npu")
    with pytest.warns(UserWarning, match="resized"):
        torch.mul(npu(a), npu(b), out=out)
    assert out.shape == (6, 5)
    assert_same(out, a * b)
    out0 = torch.empty(0, device="npu")
    torch.sum(npu(a), dim=0, out=out0)  # empty outs resize silently
    assert_same(out0, a.sum(0))


def test_abandoned_out_kernel_attempt_raises_no_warning(run_py):
    """mse_loss is computed through mse_loss.out, whose CPU kernel resizes its
    0-dim output to the input's shape and then fails on device memory; the op
    falls back to its functional kernel, and the abandoned attempt must not
    warn "An output with one or more elements was resized" (it did, on
    executor threads, once per process: hence a fresh interpreter). Note
    [Warnings of abandoned out= attempts]."""
    out = run_py('''
        import warnings
        import torch, torch_npu
        warnings.simplefilter("error")  # a Python warning fails the run
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
        for reduction in ("mean", "sum", "none"):
            a = x.to("npu").requires_grad_()
            loss = torch.nn.functional.mse_loss(a, y.to("npu"), reduction=reduction)
            loss.sum().backward()
            torch.npu.synchronize()
            c = x.clone().requires_grad_()
            want = torch.nn.functional.mse_loss(c, y, reduction=reduction)
            want.sum().backward()
            torch.testing.assert_close(loss.cpu(), want.detach())
            torch.testing.assert_close(a.grad.cpu(), c.grad)
        print("ok")
    ''')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    # Warnings raised on executor threads are printed by c10, not Python.
    assert "resized" not in out.stderr, out.stderr


def test_out_with_reduction_and_dtype(data):
    a, _ = data
    out = torch.empty(6, dtype=torch.float64, device="npu")
    torch.sum(npu(a), dim=1, dtype=torch.float64, out=out)
    assert_same(out, a.sum(1, dtype=torch.float64))


@pytest.mark.parametrize("lhs,rhs", [
    (torch.int32, torch.float32),
    (torch.int64, torch.float64),
    (torch.uint8, torch.int16),
    (torch.bool, torch.int32),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float32),
    (torch.int32, torch.complex64),
])
def test_type_promotion(lhs, rhs):
    a = torch.arange(6).to(lhs)
    b = (torch.arange(6) % 3 + 1).to(rhs)
    assert_same(npu(a) * npu(b) + npu(a), a * b + a)


def test_scalar_and_cpu_zero_dim_operands():
    x = torch.arange(4, dtype=torch.int32, device="npu")
    assert_same(x * 2.5, torch.arange(4, dtype=torch.int32) * 2.5)
    assert_same(x + torch.tensor(1.5), torch.arange(4, dtype=torch.int32) + torch.tensor(1.5))


def test_zero_dim_tensors():
    s = torch.tensor(3.0, device="npu")
    assert s.dim() == 0
    r = s * 2 + torch.tensor(1.0, device="npu")
    assert r.shape == () and r.item() == 7.0
    assert torch.ones(3, device="npu").sum().dim() == 0


def test_empty_tensors():
    e = torch.empty(0, 3, device="npu")
    assert_same(e + 1, torch.empty(0, 3) + 1)
    assert (e.sum()).item() == 0.0
    assert_same(e.sum(0), torch.zeros(3))
    assert torch.cat([e, torch.ones(2, 3, device="npu")]).shape == (2, 3)
    assert torch.empty(0, device="npu").tolist() == []
    assert torch.nonzero(torch.zeros(5, device="npu")).shape == (0, 1)


def test_ops_use_the_current_stream(gate):
    s = torch.npu.Stream()
    x = torch.ones(4, device="npu")
    torch.npu.synchronize()
    g = gate(s)
    with torch.npu.stream(s):
        y = x + 1  # queued on s, which is blocked
    assert not s.query()
    assert torch.npu.default_stream().query()
    g.release()
    s.synchronize()
    assert y.tolist() == [2.0] * 4


def test_queued_op_on_an_empty_tensor_ignores_later_inplace_metadata_changes(gate):
    """An empty tensor has no memory, so a task holds it by reference; it must
    still see the shape it had at enqueue, not the one a later in-place view
    op gave it (Note [Task captures are metadata snapshots])."""
    g = gate(torch.npu.current_stream())
    r = torch.zeros(0, 1, 2, 1, device="npu") + 1  # add.out into an empty r, queued
    r.unsqueeze_(-2)  # while add waits
    t = torch.zeros(0, 3, device="npu").sum(1)  # sum into an empty output, queued
    t.unsqueeze_(0)
    g.release()
    torch.npu.synchronize()
    assert r.shape == (0, 1, 2, 1, 1) and t.shape == (1, 0)


def test_queued_op_on_another_streams_tensor_ignores_later_inplace_metadata_changes(gate):
    """A tensor of another stream is held by reference; a t_() on the host
    while the op waits must not change what the op computes."""
    x = torch.arange(6.0, device="npu").reshape(2, 3)
    want = torch.arange(6.0).reshape(2, 3) * 2
    torch.npu.synchronize()
    s = torch.npu.Stream()
    g = gate(s)
    with torch.npu.stream(s):
        y = x * 2  # x belongs to the default stream: captured by reference
    x.t_()
    g.release()
    s.synchronize()
    assert_same(y, want)


def test_random_ops_on_npu():
    torch.npu.manual_seed(1)
    a = torch.rand(1000, device="npu")
    assert 0.0 <= a.min().item() and a.max().item() < 1.0
    b = torch.randint(0, 10, (1000,), device="npu")
    assert set(b.unique().tolist()) <= set(range(10))
    d = torch.nn.functional.dropout(torch.ones(1000, device="npu"), p=0.5)
    assert set(d.unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("op", [torch.native_batch_norm, torch._native_batch_norm_legit])
def test_batch_norm_eval_placeholders_are_cpus(op):
    """In eval mode save_mean/save_invstd are placeholders: empty on CPU,
    C uninitialised elements by the meta kernel; npu returns CPU's (Note
    [Placeholder outputs of batch norm in eval mode])."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 4, generator=g)
    w, b = torch.randn(2, generator=g), torch.randn(2, generator=g)
    mean, var = torch.randn(2, generator=g), torch.rand(2, generator=g) + 0.5
    for training in (False, True):
        want = op(x, w, b, mean.clone(), var.clone(), training, 0.1, 1e-5)
        got = op(npu(x), npu(w), npu(b), npu(mean), npu(var), training, 0.1, 1e-5)
        for r, c in zip(got, want):
            assert_same(r, c)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.empty(2, 3, device=d),
        lambda d: torch.empty(0, device=d),
        lambda d: torch.empty(0, 3, device=d),
        lambda d: torch.empty((), device=d),
        lambda d: torch.empty(2, 3, 4, 5, device=d, memory_format=torch.channels_last),
        lambda d: torch.empty(2, 3, 4, 5, 6, device=d, memory_format=torch.channels_last_3d),
        lambda d: torch.empty(3, dtype=torch.float64, device=d),
        lambda d: torch.empty_strided((2, 3), (1, 2), device=d),
        lambda d: torch.empty_strided((2, 3), (0, 1), device=d),  # overlapping
        lambda d: torch.empty_strided((2, 3), (10, 2), device=d),  # with gaps
        lambda d: torch.empty_strided((2, 0), (1, 1), device=d),
        lambda d: torch.empty_like(torch.empty(4, 2, device=d).t()),
    ],
)
def test_empty_factories_give_cpus_metadata(make):
    # The npu factories build their tensors themselves (Note [npu tensors are
    # made with NPUStorageImpl]); shapes, strides, dtype and storage sizes
    # must be what CPU's give.
    n, c = make("npu"), make("cpu")
    assert n.device.type == "npu"
    assert (n.shape, n.stride(), n.dtype, n.storage_offset()) == (
        c.shape,
        c.stride(),
        c.dtype,
        c.storage_offset(),
    )
    assert n.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    assert n.untyped_storage().resizable()


def test_empty_factories_refuse_what_cpu_refuses():
    for make in (
        lambda d: torch.empty(2, -1, device=d),
        lambda d: torch.empty_strided((2, -3), (1, 1), device=d),
        lambda d: torch.empty(2, 3, device=d, memory_format=torch.channels_last),  # not 4-d
    ):
        with pytest.raises(RuntimeError) as cpu_error:
            make("cpu")
        with pytest.raises(RuntimeError) as npu_error:
            make("npu")
        assert str(cpu_error.value).split("\n")[0] in str(npu_error.value)


def test_storages_made_through_pythons_storage_api_are_usable():
    # torch.UntypedStorage goes through c10's storage factory, which makes an
    # NPUStorageImpl for npu (core/NPUStorageImpl.h).
    s = torch.UntypedStorage(16, device="npu")
    assert s.device.type == "npu" and s.nbytes() == 16
    t = torch.empty(0, device="npu").set_(s, 0, (4,), (1,))
    t.fill_(2.5)
    assert t.tolist() == [2.5] * 4
    s.resize_(32)
    assert s.nbytes() == 32


def test_complex32_factories_warn_that_the_dtype_is_experimental():
    # As CPU's factories do, once per process (hence a process of its own).
    out = run_py_ok(
        "import warnings, torch, torch_npu\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    torch.empty(2, dtype=torch.complex32, device='npu')\n"
        "    torch.empty_strided((2,), (1,), dtype=torch.complex32, device='npu')\n"
        "print(sum('experimental' in str(x.message) for x in w))\n"
    )
    assert out.split()[-1] == "1"
