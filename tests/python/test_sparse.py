"""Sparse npu tensors: COO and the compressed layouts (CSR, CSC, BSR, BSC).

See Note [Sparse npu tensors] (csrc/aten/sparse/SparseTensors.h): creation,
transfers both ways, ops against CPU, autograd, stream order, host-sync
accounting of the ops whose nnz depends on the data, and bad inputs. The op
database's sparse ops (to_sparse, sparse.sampled_addmm, sparse.mm.reduce)
are checked by test_opdb.py; comm of sparse tensors by test_comm.py.
"""

import warnings

import pytest
import torch
import torch_npu

# PyTorch warns once per process about invariant checks and CSR's beta state.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse")


def dense_sample() -> torch.Tensor:
    return torch.tensor([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 4.0], [0.0, 0.0, 5.0, 0.0]])


def uncoalesced_cpu() -> torch.Tensor:
    """A COO tensor with duplicate indices (they add up)."""
    indices = torch.tensor([[0, 1, 0, 2, 1], [1, 0, 1, 3, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    return torch.sparse_coo_tensor(indices, values, (3, 4))


def assert_sparse_equal(npu: torch.Tensor, cpu: torch.Tensor) -> None:
    assert npu.device.type == "npu" and npu.layout == cpu.layout and npu.shape == cpu.shape
    assert npu.dtype == cpu.dtype
    torch.testing.assert_close(npu.to_dense().cpu(), cpu.to_dense())


def components(t: torch.Tensor):
    if t.layout == torch.sparse_coo:
        return [t._indices(), t._values()]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [t.crow_indices(), t.col_indices(), t.values()]
    return [t.ccol_indices(), t.row_indices(), t.values()]


# --- creation and transfers -----------------------------------------------------


def test_dense_npu_to_sparse_coo_matches_cpu():
    x = dense_sample()
    s = x.npu().to_sparse()
    assert s.is_sparse and s.device == torch.device("npu:0")
    assert s._indices().device.type == "npu" and s._values().device.type == "npu"
    assert s._nnz() == 5 and s.sparse_dim() == 2 and s.dense_dim() == 0 and s.is_coalesced()
    expected = x.to_sparse()
    assert torch.equal(s._indices().cpu(), expected._indices())
    assert torch.equal(s._values().cpu(), expected._values())
    hybrid = x.npu().to_sparse(1)  # one sparse dimension, rows as dense values
    assert hybrid.sparse_dim() == 1 and hybrid.dense_dim() == 1
    assert torch.equal(hybrid.to_dense().cpu(), x)


@pytest.mark.parametrize("layout,blocksize", [(torch.sparse_csr, None), (torch.sparse_csc, None),
                                              (torch.sparse_bsr, (1, 2)), (torch.sparse_bsc, (3, 1))])
def test_dense_npu_to_compressed_layouts(layout, blocksize):
    x = dense_sample()
    s = x.npu().to_sparse(layout=layout, blocksize=blocksize)
    expected = x.to_sparse(layout=layout, blocksize=blocksize)
    assert s.layout == layout and s.device.type == "npu"
    for a, e in zip(components(s), components(expected)):
        assert a.device.type == "npu"
        assert torch.equal(a.cpu(), e)
    assert torch.equal(s.to_dense().cpu(), x)
    assert torch.equal(s.cpu().to_dense(), x)


def test_sparse_coo_tensor_factory_on_npu():
    i = torch.tensor([[0, 1, 1], [2, 0, 2]])
    v = torch.tensor([3.0, 4.0, 5.0])
    s = torch.sparse_coo_tensor(i, v, (2, 3), device="npu")
    assert s.device == torch.device("npu:0") and s._indices().device.type == "npu"
    assert torch.equal(s.to_dense().cpu(), torch.sparse_coo_tensor(i, v, (2, 3)).to_dense())
    on1 = torch.sparse_coo_tensor(i.npu(1), v.npu(1), (2, 3))
    assert on1.device == torch.device("npu:1") and on1._values().device == torch.device("npu:1")
    empty = torch.sparse_coo_tensor(size=(4, 5), device="npu:1")
    assert empty.device == torch.device("npu:1") and empty._nnz() == 0
    assert torch.equal(empty.to_dense().cpu(), torch.zeros(4, 5))
    csr = torch.sparse_csr_tensor(torch.tensor([0, 1, 3]), torch.tensor([2, 0, 1]), v, (2, 3),
                                  device="npu")
    assert csr.device.type == "npu" and csr.crow_indices().device.type == "npu"
    assert torch.equal(csr.to_dense().cpu(), torch.tensor([[0.0, 0.0, 3.0], [4.0, 5.0, 0.0]]))


def test_transfers_both_ways_and_across_devices():
    cpu = uncoalesced_cpu()
    npu = cpu.to("npu")
    assert not npu.is_coalesced() and npu._nnz() == 5  # a copy keeps the indices as they are
    assert torch.equal(npu._indices().cpu(), cpu._indices())
    back = npu.cpu()
    assert back.layout == torch.sparse_coo and back.device.type == "cpu"
    assert torch.equal(back._indices(), cpu._indices()) and torch.equal(back._values(), cpu._values())
    on1 = npu.to("npu:1")
    assert on1.device == torch.device("npu:1") and on1._indices().device == torch.device("npu:1")
    assert torch.equal(on1.to_dense().cpu(), cpu.to_dense())
    csr = dense_sample().to_sparse_csr()
    assert torch.equal(csr.npu().cpu().to_dense(), csr.to_dense())
    dst = torch.zeros(3, 4, device="npu").to_sparse()
    dst.copy_(cpu)
    assert torch.equal(dst.to_dense().cpu(), cpu.to_dense())
    assert torch.equal(npu.clone().to_dense().cpu(), cpu.to_dense())


# --- ops against CPU -------------------------------------------------------------


def test_coalesce_matches_cpu():
    cpu = uncoalesced_cpu()
    c = cpu.npu().coalesce()
    expected = cpu.coalesce()
    assert c.is_coalesced() and c._nnz() == expected._nnz() == 3
    assert torch.equal(c._indices().cpu(), expected._indices())
    assert torch.equal(c._values().cpu(), expected._values())


@pytest.mark.parametrize("name,fn", [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("scale", lambda a, b: a * 2.5),
    ("div", lambda a, b: a / 4),
    ("neg", lambda a, b: -a),
    ("sin", lambda a, b: torch.sin(a)),
    ("pow", lambda a, b: a.pow(2)),
    ("transpose", lambda a, b: a.t()),
    ("index_select", lambda a, b: a.index_select(1, torch.tensor([3, 1], device=a.device))),
    ("sparse_sum", lambda a, b: torch.sparse.sum(a, dim=1)),
    ("softmax", lambda a, b: torch.sparse.softmax(a, dim=1)),
])
def test_sparse_results_match_cpu(name, fn):
    a, b = uncoalesced_cpu(), dense_sample().to_sparse()
    expected = fn(a, b)
    actual = fn(a.npu(), b.npu())
    assert_sparse_equal(actual, expected)


@pytest.mark.parametrize("name,fn", [
    ("sparse.mm", lambda s, d: torch.sparse.mm(s, d)),
    ("mm", lambda s, d: s @ d),
    ("addmm", lambda s, d: torch.addmm(torch.ones(3, 2, device=d.device), s, d, beta=0.5, alpha=2)),
    ("add_dense", lambda s, d: torch.ones(3, 4, device=d.device) + s),
    ("to_dense", lambda s, d: s.to_dense()),
    ("sum", lambda s, d: s.sum()),
    ("csr_mm", lambda s, d: s.to_sparse_csr() @ d),
    ("csr_mul_dense", lambda s, d: (s.to_sparse_csr() * torch.full((3, 4), 2.0, device=d.device)).to_dense()),
])
def test_dense_results_match_cpu(name, fn):
    s, d = uncoalesced_cpu(), torch.arange(8.0).reshape(4, 2)
    expected = fn(s, d)
    actual = fn(s.npu(), d.npu())
    assert actual.device.type == "npu" and actual.layout == torch.strided
    torch.testing.assert_close(actual.cpu(), expected)


def test_in_place_ops_on_sparse_npu_tensors():
    cpu, other = uncoalesced_cpu(), dense_sample().to_sparse()
    npu = cpu.npu()
    npu.add_(other.npu())  # replaces npu's indices and values
    cpu.add_(other)
    assert_sparse_equal(npu, cpu)
    npu.mul_(3.0)
    cpu.mul_(3.0)
    assert_sparse_equal(npu, cpu)
    npu.zero_()
    assert npu._nnz() == 0 and torch.equal(npu.to_dense().cpu(), torch.zeros(3, 4))
    dense = torch.ones(3, 4, device="npu")
    dense.add_(other.npu())  # a dense tensor written by the sparse op path
    torch.testing.assert_close(dense.cpu(), torch.ones(3, 4) + other.to_dense())


# --- autograd ------------------------------------------------------------------------


def test_gradients_through_sparse_ops_match_cpu():
    def run(device):
        x = dense_sample().to(device).requires_grad_()
        w = torch.arange(8.0).reshape(4, 2).to(device).requires_grad_()
        s = x.to_sparse()
        y = torch.sparse.mm(s, w)
        loss = (y * y).sum() + torch.sparse.sum(s * 2.0) + s.to_dense().pow(2).sum()
        loss.backward()
        return x.grad, w.grad

    gx_cpu, gw_cpu = run("cpu")
    gx, gw = run("npu")
    assert gx.device.type == "npu" and gw.device.type == "npu"
    torch.testing.assert_close(gx.to_dense().cpu() if gx.is_sparse else gx.cpu(),
                               gx_cpu.to_dense() if gx_cpu.is_sparse else gx_cpu)
    torch.testing.assert_close(gw.cpu(), gw_cpu)


def test_sparse_gradient_of_values_matches_cpu():
    def run(device):
        values = torch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
        indices = torch.tensor([[0, 1, 2], [2, 0, 1]], device=device)
        s = torch.sparse_coo_tensor(indices, values, (3, 3))
        (torch.sparse.mm(s, torch.eye(3, device=device) * 2).sum()).backward()
        return values.grad

    torch.testing.assert_close(run("npu").cpu(), run("cpu"))


@pytest.mark.parametrize("reduce", ["sum", "amax"])
def test_sparse_mm_reduce_gradients_match_cpu(reduce):
    # amax's backward reads the argmax indices the forward computes only for
    # inputs that require grad (Note [Sparse kernels read requires_grad]).
    def run(device):
        a = dense_sample().to_sparse_csr().to(device).requires_grad_()
        w = torch.arange(8.0).reshape(4, 2).to(device).requires_grad_()
        torch.sparse.mm(a, w, reduce).pow(2).sum().backward()
        return a.grad.to_dense().cpu(), w.grad.cpu()

    for actual, expected in zip(run("npu"), run("cpu")):
        torch.testing.assert_close(actual, expected)


# --- streams and host syncs --------------------------------------------------------------


def test_to_dense_is_queued_not_waited_for(gate):
    s = uncoalesced_cpu().npu()
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    torch_npu.npu.reset_host_sync_stats()
    d = s.to_dense()  # returns while the stream is blocked: no host sync
    done = torch.npu.Event()
    done.record()
    assert not done.query()
    assert torch_npu.npu.host_sync_count() == 0
    g.release()
    done.synchronize()
    assert torch.equal(d.cpu(), uncoalesced_cpu().to_dense())


def test_data_dependent_ops_are_host_syncs_and_follow_the_debug_mode():
    x = dense_sample().npu()
    s = uncoalesced_cpu().npu()
    torch_npu.npu.reset_host_sync_stats()
    x.to_sparse()
    s.coalesce()
    stats = torch_npu.npu.host_sync_stats()
    assert stats == {"aten::_to_sparse": 1, "aten::_coalesce": 1}
    try:
        torch_npu.npu.set_sync_debug_mode("error")
        with pytest.raises(RuntimeError, match="called a synchronizing NPU operation: aten::_coalesce"):
            s.coalesce()
        s.to_dense()  # asynchronous: allowed in error mode
        torch_npu.npu.set_sync_debug_mode("warn")
        with pytest.warns(UserWarning, match="synchronizing NPU operation: aten::_to_sparse"):
            x.to_sparse()
    finally:
        torch_npu.npu.set_sync_debug_mode("default")


def test_sparse_ops_run_in_stream_order(npurt):
    # The dense input is written on a slow stream; to_sparse (synchronous)
    # and to_dense (queued) on that stream must both see the writes.
    slow = torch_npu.npu.Stream()
    assert npurt.npuStreamSetTaskDelay(slow.npu_stream, 20_000) == 0
    try:
        with torch.npu.stream(slow):
            x = torch.zeros(3, 4, device="npu")
            x.add_(dense_sample().npu())
            s = x.to_sparse()
            d = (s * 2).to_dense()
        # Another stream reads the results after an event, not a sleep.
        other = torch_npu.npu.Stream()
        other.wait_stream(slow)
        with torch.npu.stream(other):
            assert d.sum().item() == 2 * dense_sample().sum().item()
    finally:
        assert npurt.npuStreamSetTaskDelay(slow.npu_stream, -1) == 0
    assert s._nnz() == 5


# --- bad inputs ------------------------------------------------------------------------------


def test_mismatched_devices_are_refused():
    s = uncoalesced_cpu().npu()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(s, torch.ones(4, 2))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(s, torch.ones(4, 2, device="npu:1"))
    with pytest.raises(RuntimeError, match="same device"):
        s + uncoalesced_cpu().npu(1)


def test_wrong_index_dtypes_are_refused():
    # torch.sparse_coo_tensor converts its indices to int64; the ATen
    # constructors take them as given.
    v = torch.tensor([1.0, 2.0], device="npu")
    for dtype in (torch.int32, torch.float32):
        i = torch.tensor([[0, 1], [1, 0]], dtype=dtype, device="npu")
        with pytest.raises(RuntimeError, match="indices must be an int64 tensor"):
            torch.ops.aten._sparse_coo_tensor_unsafe(i, v, [2, 2])
    # Compressed indices are checked before a CPU kernel reads them.
    floats = torch.ops.aten._sparse_compressed_tensor_unsafe(
        torch.tensor([0.0, 1, 2], device="npu"), torch.tensor([0.0, 1], device="npu"), v, [2, 2],
        layout=torch.sparse_csr, device="npu")
    with pytest.raises(RuntimeError, match="crow_indices and col_indices dtype must be Int or Long, but got Float"):
        floats.to_dense()


def test_out_of_range_indices_raise_instead_of_crashing():
    i = torch.tensor([[0, 7], [1, 0]])  # row 7 of a 2x2 tensor
    v = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        torch.sparse_coo_tensor(i, v, (2, 2), device="npu", check_invariants=True)
    bad = torch.sparse_coo_tensor(i, v, (2, 2), device="npu", check_invariants=False)
    # The sparse op path validates before a CPU kernel reads out of bounds.
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 7"):
        bad.coalesce()
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        torch.sparse.mm(bad, torch.ones(2, 2, device="npu"))
    # to_dense is queued: its task fails with index_put_'s bounds message,
    # reported at the next read, and the device stays usable.
    with pytest.raises(RuntimeError, match="out of bounds"):
        bad.to_dense().cpu()
    csr = torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 9]), v, (2, 2),
                                  device="npu", check_invariants=False)
    with pytest.raises(RuntimeError, match="col_indices"):
        csr.to_dense()
    assert torch.ones(2, device="npu").sum().item() == 2.0


def test_to_dense_refuses_a_dtype_like_cpu():
    s = uncoalesced_cpu()
    with pytest.raises(RuntimeError, match="dtype argument is not supported by sparse_to_dense"):
        s.to_dense(dtype=torch.float64)
    with pytest.raises(RuntimeError, match="dtype argument is not supported by sparse_to_dense"):
        s.npu().to_dense(dtype=torch.float64)


def test_warnings_are_pytorchs_own():
    # No warning of ours: a sparse op on npu behaves like one on CPU.
    s = uncoalesced_cpu().npu()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (s + s).coalesce()
