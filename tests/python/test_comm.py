"""torch_npu.npu.comm (and torch.cuda.comm, which calls the same torch._C
functions): broadcast, broadcast_coalesced, reduce_add(_coalesced), scatter and
gather across the two simulated devices, with their stream ordering and their
errors."""

import pytest
import torch
import torch_npu
from torch.nn.parallel import scatter_gather

import torch.cuda.comm as cuda_comm

comm = torch_npu.npu.comm


def test_cuda_comm_is_the_same_functions():
    assert cuda_comm.broadcast is comm.broadcast
    assert torch._C._broadcast.__module__ == "torch_npu.npu._data_parallel_comm"


@pytest.mark.parametrize("source", ["cpu", "npu:0", "npu:1"])
def test_broadcast(source):
    x = torch.randn(5, 5).to(source)
    a, b = comm.broadcast(x, (0, 1))
    assert (a.device, b.device) == (torch.device("npu:0"), torch.device("npu:1"))
    torch.testing.assert_close(a.cpu(), x.cpu())
    torch.testing.assert_close(b.cpu(), x.cpu())
    for out in (a, b):
        same = x.device == out.device
        assert (out.data_ptr() == x.data_ptr()) == same  # no copy on the source's own device


def test_broadcast_out_and_errors():
    x = torch.randn(3, 4, device="npu:0")
    outs = [torch.empty(3, 4, device="npu:0"), torch.empty(3, 4, device="npu:1")]
    res = comm.broadcast(x, out=outs)
    assert res[0] is outs[0] and res[1] is outs[1]
    torch.testing.assert_close(outs[1].cpu(), x.cpu())
    with pytest.raises(RuntimeError, match="Exactly one of 'devices' and 'out'"):
        comm.broadcast(x, (0, 1), out=outs)
    with pytest.raises(RuntimeError, match="to be NPU tensors, but output tensor at index 1 has device 'cpu'"):
        comm.broadcast(x, out=[outs[0], x.cpu()])
    with pytest.raises(RuntimeError, match=r"same shape as the source tensor \[3, 4\], but output tensor at index 1 "
                                           r"has shape \[1, 3, 4\]"):
        comm.broadcast(x, out=[outs[0], outs[1].unsqueeze(0)])
    with pytest.raises(RuntimeError, match="Expected non-negative device index, but got -2"):
        comm.broadcast(x, (0, -2))
    a, b = comm.broadcast(x, (1, 1))  # a device named twice gets two copies, as with CUDA
    assert a.data_ptr() != b.data_ptr()
    torch.testing.assert_close(b.cpu(), x.cpu())


def test_broadcast_waits_for_the_producer_stream(npurt):
    # The source is written on a slow stream of npu:0; the copy to npu:1 must
    # still see the written values (it is ordered after that stream's work).
    slow = torch_npu.npu.Stream(device=0)
    assert npurt.npuStreamSetTaskDelay(slow.npu_stream, 50_000) == 0
    try:
        with torch.npu.device(0), torch.npu.stream(slow):
            x = torch.zeros(1000, device="npu:0")
            x.add_(7)
            _, y = comm.broadcast(x, (0, 1))
        assert y.sum().item() == 7000
    finally:
        assert npurt.npuStreamSetTaskDelay(slow.npu_stream, -1) == 0


def test_broadcast_coalesced_keeps_order_and_gives_fresh_versions():
    tensors = [torch.arange(5).npu(), torch.randn(5).npu(), torch.tensor([], dtype=torch.uint8).npu(),
               torch.randn(3, 2).double().npu(), torch.arange(10).int().npu()]
    on0, on1 = comm.broadcast_coalesced(tensors, (0, 1), buffer_size=32)
    for t, a, b in zip(tensors, on0, on1):
        assert a is t
        assert b.device == torch.device("npu:1") and b.dtype == t.dtype and b.shape == t.shape
        torch.testing.assert_close(b.cpu(), t.cpu())
    versions = [b._version for b in on1]
    on1[0].zero_()
    assert on1[0]._version == versions[0] + 1 and on1[1]._version == versions[1]
    with pytest.raises(RuntimeError, match=r"All tensors must be on devices\[0\]: 1"):
        comm.broadcast_coalesced(tensors, (1, 0))
    csr = torch.eye(2).to_sparse_csr()
    with pytest.raises(RuntimeError, match="sparse_csr tensors are not supported: npu broadcasts strided and "
                                           "sparse_coo tensors"):
        torch._C._broadcast_coalesced([csr], [0, 1], 1024)


@pytest.mark.filterwarnings("ignore:Sparse")
def test_broadcast_coalesced_and_reduce_add_of_sparse_tensors():
    # Sparse COO tensors among dense ones, as torch.cuda.comm takes them:
    # broadcast whole, coalesced by flat buffers of indices and values, and
    # summed (sparse + sparse) by reduce_add.
    sparse = [torch.sparse_coo_tensor(torch.tensor([[0, 1, 0], [2, 0, 2]]), torch.tensor([1.0, 2.0, 3.0]),
                                      (2, 3)).npu(),
              torch.eye(3, dtype=torch.float64).to_sparse().npu()]
    tensors = [sparse[0], torch.arange(4.0).npu(), sparse[1]]
    _, copy = comm.broadcast(sparse[0], (0, 1))
    assert copy.is_sparse and copy.device == torch.device("npu:1")
    assert copy._indices().device == torch.device("npu:1")
    on0, on1 = comm.broadcast_coalesced(tensors, (0, 1), buffer_size=40)
    for t, a, b in zip(tensors, on0, on1):
        assert a is t and b.device == torch.device("npu:1") and b.layout == t.layout
        assert not t.is_sparse or b.is_coalesced() == t.is_coalesced()
        dense = (lambda x: x.to_dense()) if t.is_sparse else (lambda x: x)
        torch.testing.assert_close(dense(b).cpu(), dense(t).cpu())
    sums = comm.reduce_add_coalesced([tensors, on1], destination=0, buffer_size=40)
    for s, t in zip(sums, tensors):
        assert s.device == torch.device("npu:0") and s.layout == t.layout
        dense = (lambda x: x.to_dense()) if t.is_sparse else (lambda x: x)
        torch.testing.assert_close(dense(s).cpu(), dense(t).cpu() * 2)


def test_reduce_add_and_coalesced():
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    r = comm.reduce_add((x.npu(0), y.npu(1)))
    assert r.device == torch.device("npu:0")
    torch.testing.assert_close(r.cpu(), x + y)
    tensors = [torch.randn(5).npu(), torch.arange(5).npu(), torch.randn(2, 3).double().npu()]
    sums = comm.reduce_add_coalesced([tensors, [t.npu(1) for t in tensors]], buffer_size=24)
    for s, t in zip(sums, tensors):
        assert s.device == torch.device("npu:0") and s.dtype == t.dtype
        torch.testing.assert_close(s.cpu(), (t * 2).cpu())


@pytest.mark.parametrize("source", ["cpu", "npu:0"])
@pytest.mark.parametrize("dim,sizes", [(0, None), (1, None), (-2, None), (0, (2, 4))])
def test_scatter(source, dim, sizes):
    x = torch.randn(6, 4).to(source)
    parts = comm.scatter(x, (0, 1), sizes, dim)
    expected = x.cpu().split(list(sizes), dim) if sizes else x.cpu().chunk(2, dim)
    for i, (p, e) in enumerate(zip(parts, expected)):
        assert p.device == torch.device("npu", i)
        torch.testing.assert_close(p.cpu(), e, atol=0, rtol=0)
    if source == "npu:0":
        assert parts[0].data_ptr() == x.data_ptr()  # a view, no copy
    outs = [torch.empty_like(p) for p in parts]
    assert all(a is b for a, b in zip(comm.scatter(x, dim=dim, out=outs), outs))
    torch.testing.assert_close(outs[1].cpu(), expected[1], atol=0, rtol=0)


def test_scatter_errors():
    x = torch.randn(4, 4)
    outs = [torch.empty(2, 4, device="npu:0"), torch.empty(2, 4, device="npu:1")]
    with pytest.raises(RuntimeError, match="Expected devices and chunk_sizes to be of same length"):
        comm.scatter(x, [0, 1, 0], chunk_sizes=(2, 2))
    with pytest.raises(RuntimeError, match="'devices' must not be specified"):
        comm.scatter(x, (0, 1), out=outs)
    with pytest.raises(RuntimeError, match="Expected at least one device to scatter to"):
        comm.scatter(x, ())
    with pytest.raises(RuntimeError, match="Expected at least one output tensor to scatter to"):
        comm.scatter(x, out=[])
    with pytest.raises(RuntimeError, match="to be NPU tensors, but output tensor at index 0"):
        comm.scatter(x, out=[outs[0].cpu(), outs[1]])
    with pytest.raises(RuntimeError, match=r"Output tensor at index 0 has incorrect shape: \[1, 2, 4\]"):
        comm.scatter(x, out=[outs[0].unsqueeze(0), outs[1]])
    with pytest.raises(RuntimeError, match="Total size for output tensors along scatter dim 0 does not match"):
        comm.scatter(x, out=[outs[0][1:], outs[1]])
    s = torch_npu.npu.Stream(device=0)
    with pytest.raises(RuntimeError, match=r"stream at index 1 \(was 0\) to match the device supplied at that "
                                           r"index \(expected 1\)"):
        comm.scatter(x, (0, 1), streams=[None, s])


def test_scatter_on_given_streams():
    x = torch.randn(4, 3)
    streams = [torch_npu.npu.Stream(device=0), torch_npu.npu.Stream(device=1)]
    parts = comm.scatter(x, (0, 1), streams=streams)
    for p, s in zip(parts, streams):
        s.synchronize()
    torch.testing.assert_close(torch.cat([p.cpu() for p in parts]), x)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("destination", [None, "npu:0", "cpu"])
def test_gather(dim, destination):
    x, y = torch.randn(2, 5, device="npu:0"), torch.randn(2, 5, device="npu:1")
    with torch.npu.device(1):
        r = comm.gather((x, y), dim, destination=destination)
        expected_device = torch.device(destination) if destination else torch.device("npu:1")
        assert r.device == expected_device
        torch.testing.assert_close(r.cpu(), torch.cat([x.cpu(), y.cpu()], dim))
        out = torch.empty(r.shape, device=expected_device)
        assert comm.gather((x, y), dim, out=out) is out
        torch.testing.assert_close(out.cpu(), r.cpu())


def test_gather_errors():
    x, y = torch.randn(2, 5, device="npu:0"), torch.randn(2, 5, device="npu:1")
    with pytest.raises(RuntimeError, match="'destination' must not be specified"):
        comm.gather((x, y), destination="cpu", out=torch.empty(4, 5))
    with pytest.raises(RuntimeError, match="Expected at least one tensor to gather from"):
        comm.gather(())
    with pytest.raises(RuntimeError, match="Expected all input tensors to be NPU tensors, but tensor at index 0"):
        comm.gather((x.cpu(), y))
    with pytest.raises(RuntimeError, match="same number of dimensions, but tensor at index 1 has 3 dimensions"):
        comm.gather((x, y.unsqueeze(0)))
    with pytest.raises(RuntimeError, match=r"Input tensor at index 1 has invalid shape \[2, 4\], but expected \[2, 5\]"):
        comm.gather((x, y[:, 1:]), dim=0)
    with pytest.raises(RuntimeError, match=r"Expected out tensor to have shape \[4, 5\], but got \[4, 4\]"):
        comm.gather((x, y), out=torch.empty(4, 4, device="npu:0"))


def test_scatter_gather_keep_channels_last():
    nhwc = torch.randn(4, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    parts = comm.scatter(nhwc, (0, 1), None, 0)
    assert all(p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous() for p in parts)
    assert comm.gather(parts).is_contiguous(memory_format=torch.channels_last)


def test_nn_parallel_scatter_gather():
    a = torch.arange(8.0, device="npu:0")
    parts = scatter_gather.scatter((a,), [torch.device("npu:0"), torch.device("npu:1")])
    assert [p[0].device.index for p in parts] == [0, 1]
    back = scatter_gather.gather([p[0] for p in parts], "cpu")
    torch.testing.assert_close(back, a.cpu())
