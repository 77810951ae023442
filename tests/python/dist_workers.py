"""Worker functions of test_distributed.py, run in spawned processes.

Each worker is one rank on its own simulated device (``NPU_SIM_DEVICE_COUNT``
is the world size, ``torch.npu.set_device(rank)``), joined through a FileStore
and gloo over the loopback interface. A worker checks many things with one
process group, because spawning processes is the expensive part; a failed
check raises, and torch.multiprocessing reports the rank's traceback.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import datetime
import os
from typing import Callable, Iterator, List

import torch
import torch.distributed as dist
import torch_npu

TIMEOUT = datetime.timedelta(seconds=60)


def _init(rank: int, world: int, store_path: str, backend: str = "hccl") -> None:
    torch.npu.set_device(rank)
    dist.init_process_group(
        backend, init_method=f"file://{store_path}", rank=rank, world_size=world, timeout=TIMEOUT
    )


def _expect_raises(fn: Callable[[], object], *needles: str) -> str:
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        for needle in needles:
            assert needle in text, f"expected {needle!r} in the error, got: {text}"
        return text
    raise AssertionError(f"expected an error containing {needles}")


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    a, b = a.cpu(), b.cpu()
    assert torch.equal(a, b), f"{what}: got {a.tolist()}, expected {b.tolist()}"


@contextlib.contextmanager
def _slow_stream(stream: torch.Stream, delay_us: int) -> Iterator[None]:
    """NPU_SIM_TASK_DELAY_US for one stream: its tasks start late."""
    from conftest import load_npurt  # the libnpurt.so this process loaded

    rt = load_npurt()
    raw = stream.npu_stream
    assert rt.npuStreamSetTaskDelay(raw, delay_us) == 0
    try:
        yield
    finally:
        assert rt.npuStreamSetTaskDelay(raw, -1) == 0


# --------------------------------------------------------------------------
# Every collective's values (2 or 4 ranks)
# --------------------------------------------------------------------------


def check_collectives(rank: int, world: int) -> None:
    dev = torch.device("npu", rank)
    r1 = rank + 1

    def full(value: float, n: int = 4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full((n,), value, device=dev, dtype=dtype)

    total = sum(range(1, world + 1))
    x = full(r1)
    dist.all_reduce(x)
    _close(x, torch.full((4,), float(total)), "all_reduce SUM")
    for op, expected in (
        (dist.ReduceOp.MAX, world),
        (dist.ReduceOp.MIN, 1),
        (dist.ReduceOp.PRODUCT, float(torch.arange(1, world + 1).prod())),
        (dist.ReduceOp.AVG, total / world),
    ):
        x = full(r1)
        dist.all_reduce(x, op=op)
        _close(x, torch.full((4,), float(expected)), f"all_reduce {op}")
    b = torch.full((3,), 1 << rank, device=dev, dtype=torch.int32)
    dist.all_reduce(b, op=dist.ReduceOp.BOR)
    _close(b, torch.full((3,), (1 << world) - 1, dtype=torch.int32), "all_reduce BOR")

    x = full(r1)
    dist.broadcast(x, src=world - 1)
    _close(x, torch.full((4,), float(world)), "broadcast")

    for op, expected in ((dist.ReduceOp.SUM, total), (dist.ReduceOp.AVG, total / world)):
        x = full(r1)
        dist.reduce(x, dst=0, op=op)
        if rank == 0:
            _close(x, torch.full((4,), float(expected)), f"reduce {op}")

    outs = [full(-1) for _ in range(world)]
    dist.all_gather(outs, full(r1))
    for i, o in enumerate(outs):
        _close(o, torch.full((4,), float(i + 1)), "all_gather")
    flat = torch.empty(world * 2, device=dev)
    dist.all_gather_into_tensor(flat, full(r1, 2))
    _close(flat, torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(2), "all_gather_into_tensor")

    gathered = [full(-1) for _ in range(world)] if rank == 0 else None
    dist.gather(full(r1), gathered, dst=0)
    if rank == 0:
        for i, o in enumerate(gathered):
            _close(o, torch.full((4,), float(i + 1)), "gather")
    out = full(-1)
    dist.scatter(out, [full(10 + i) for i in range(world)] if rank == 0 else None, src=0)
    _close(out, torch.full((4,), float(10 + rank)), "scatter")

    out = full(-1)
    dist.reduce_scatter(out, [full(r1 * (i + 1)) for i in range(world)])
    _close(out, torch.full((4,), float(total * (rank + 1))), "reduce_scatter")
    out = torch.empty(2, device=dev)
    inp = torch.arange(world * 2, dtype=torch.float32, device=dev) * r1
    dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG)
    expect = torch.arange(world * 2, dtype=torch.float32)[rank * 2 : rank * 2 + 2] * total / world
    assert torch.allclose(out.cpu(), expect), f"reduce_scatter_tensor AVG: {out.cpu()} vs {expect}"

    outs = [full(-1, 2) for _ in range(world)]
    dist.all_to_all(outs, [full(10 * r1 + i, 2) for i in range(world)])
    for i, o in enumerate(outs):
        _close(o, torch.full((2,), float(10 * (i + 1) + rank)), "all_to_all")
    # Uneven all_to_all_single: rank r sends i+1 elements to rank i.
    in_splits = [i + 1 for i in range(world)]
    out_splits = [rank + 1] * world
    inp = torch.cat([torch.full((i + 1,), float(10 * r1 + i)) for i in range(world)]).to(dev)
    out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    expect = torch.cat([torch.full((rank + 1,), float(10 * (i + 1) + rank)) for i in range(world)])
    _close(out, expect, "all_to_all_single (uneven)")

    # Point to point around a ring, blocking and asynchronous.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = full(-1)
    reqs = [dist.isend(full(r1), nxt), dist.irecv(got, prv)]
    for req in reqs:
        req.wait()
    _close(got, torch.full((4,), float(prv + 1)), "isend/irecv")
    if rank == 0:
        dist.send(full(7), 1)
    elif rank == 1:
        got = full(-1)
        src = dist.recv(got)  # any source
        assert src == 0, f"recv from any source: source {src}"
        _close(got, torch.full((4,), 7.0), "recv (any source)")
    for recv_first in (False, True):  # the batch's one request covers every operation
        got = full(-1)
        ops = [dist.P2POp(dist.isend, full(r1), nxt), dist.P2POp(dist.irecv, got, prv)]
        for req in dist.batch_isend_irecv(ops[::-1] if recv_first else ops):
            req.wait()
        _close(got, torch.full((4,), float(prv + 1)), f"batch_isend_irecv (recv first: {recv_first})")

    dist.barrier()
    dist.distributed_c10d._get_default_group()._get_backend(dev).monitored_barrier(TIMEOUT)

    objs: List[object] = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": i} for i in range(world)], objs


def run_collectives(rank: int, world: int, store_path: str) -> None:
    _init(rank, world, store_path)
    check_collectives(rank, world)
    dist.destroy_process_group()


# --------------------------------------------------------------------------
# Stream semantics, coalescing, errors, DDP (2 ranks)
# --------------------------------------------------------------------------


def check_async_ordering(rank: int) -> None:
    """The collective sees the value queued just before it; the op after
    work.wait() sees its result; nothing synchronizes the host in between."""
    dev = torch.device("npu", rank)
    stream = torch.npu.current_stream()
    torch.npu.synchronize()
    before = torch_npu.npu.host_sync_count()
    with _slow_stream(stream, 3000):
        x = torch.zeros(1024, device=dev)
        x.add_(rank + 1)  # late: the collective must wait for it
        work = dist.all_reduce(x, async_op=True)
        work.wait()  # the current stream waits; the host does not
        y = x * 2  # must see the sum
    assert torch_npu.npu.host_sync_count() == before, "a collective synchronized the host"
    _close(y, torch.full((1024,), 6.0), "async all_reduce under a task delay")
    assert work.is_completed()
    fut = dist.all_reduce(torch.ones(4, device=dev), async_op=True).get_future()
    assert [t.cpu().tolist() for t in fut.wait()] == [[2.0] * 4]


def check_side_stream(rank: int) -> None:
    dev = torch.device("npu", rank)
    side = torch.npu.Stream()
    x = torch.full((8,), float(rank + 1), device=dev)
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side), _slow_stream(side, 2000):
        x.mul_(10)
        dist.all_reduce(x)  # ordered after mul_ on the side stream
        x.add_(1)
    torch.npu.current_stream().wait_stream(side)
    _close(x, torch.full((8,), 31.0), "collective on a side stream")


def check_coalescing(rank: int) -> None:
    dev = torch.device("npu", rank)
    a, b = torch.full((3,), 1.0, device=dev), torch.full((5,), 2.0, device=dev)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    _close(a, torch.full((3,), 2.0), "coalesced all_reduce a")
    _close(b, torch.full((5,), 4.0), "coalesced all_reduce b")
    outs = [torch.empty(4, device=dev) for _ in range(2)]
    with dist._coalescing_manager():
        for o in outs:
            dist.all_gather_into_tensor(o, torch.full((2,), float(rank), device=dev))
    for o in outs:
        _close(o, torch.tensor([0.0, 0.0, 1.0, 1.0]), "coalesced all_gather_into_tensor")
    outs = [torch.empty(1, device=dev) for _ in range(2)]
    with dist._coalescing_manager():
        for o in outs:
            dist.reduce_scatter_tensor(o, torch.tensor([1.0, 2.0], device=dev))
    for o in outs:
        _close(o, torch.tensor([2.0 * (rank + 1)]), "coalesced reduce_scatter_tensor")


def check_refusals(rank: int) -> None:
    dev = torch.device("npu", rank)
    x = torch.ones(4, device=dev)
    _expect_raises(lambda: dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0)),
                   "ProcessGroupHCCL::allreduce", "PREMUL_SUM")
    _expect_raises(lambda: dist.all_reduce(x, op=dist.ReduceOp.BXOR), "ProcessGroupHCCL::allreduce",
                   "BXOR needs integer")
    _expect_raises(lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()[0]),
                   "ProcessGroupHCCL::allreduce", "strides")
    other = torch.ones(4, device=torch.device("npu", 1 - rank))
    _expect_raises(lambda: dist.all_reduce(other), "ProcessGroupHCCL::allreduce", "drives npu:")
    # External streams: torch_npu's refusal in compat mode, allowed in full mode.
    rt = torch_npu.npu.npurt()
    handle = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(handle)) == 0
    ext = torch_npu.npu.ExternalStream(handle.value)
    with torch.npu.stream(ext):
        _expect_raises(lambda: dist.all_reduce(x),
                       "External NPU stream is not supported in ProcessGroupHCCL::collective. "
                       "This path requires a torch_npu-managed current stream.")
    torch_npu.npu.set_external_stream_mode("full")
    try:
        y = torch.ones(4, device=dev)
        torch.npu.synchronize()
        with torch.npu.stream(ext):
            dist.all_reduce(y)
            z = y + 1
        torch.npu.synchronize()
        _close(z, torch.full((4,), 3.0), "all_reduce on an external stream (full mode)")
    finally:
        torch_npu.npu.set_external_stream_mode("compat")
    assert rt.npuStreamDestroy(handle.value) == 0


def check_dtypes_gloo_lacks(rank: int, world: int) -> None:
    """Tensors of dtypes the transport has no arithmetic for (int16, uint16-64,
    float8) move through data-only collectives bit for bit, and reductions
    refuse them at the call, leaving the stream healthy (Note [Dtypes the
    transport does not know])."""
    dev = torch.device("npu", rank)
    for dtype in (torch.int16, torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn):
        x = (torch.arange(4, dtype=torch.float32) + 8 * rank).to(dtype).to(dev)
        gathered = [torch.zeros_like(x) for _ in range(world)]
        dist.all_gather(gathered, x)
        flat = torch.empty(world * 4, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(flat, x)
        b = x.clone()
        dist.broadcast(b, src=1)
        expected = [(torch.arange(4, dtype=torch.float32) + 8 * r).to(dtype) for r in range(world)]
        for r in range(world):
            assert torch.equal(gathered[r].cpu().view(torch.uint8), expected[r].view(torch.uint8)), dtype
            assert torch.equal(flat[4 * r:4 * r + 4].cpu().view(torch.uint8),
                               expected[r].view(torch.uint8)), dtype
        assert torch.equal(b.cpu().view(torch.uint8), expected[1].view(torch.uint8)), dtype
        _expect_raises(lambda: dist.all_reduce(x), "ProcessGroupHCCL::allreduce",
                       "tensors cannot be reduced by the simulator's hccl backend")
    y = torch.ones(4, device=dev)
    dist.all_reduce(y)
    _close(y, torch.full((4,), float(world)), "all_reduce after refused reductions")


def check_gloo_failure(rank: int) -> None:
    """A collective that a peer never joins fails after the group's timeout:
    on the Work, on the data, on the stream (once), and never hangs."""
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=2))
    dev = torch.device("npu", rank)
    if rank == 0:
        x = torch.ones(4, device=dev)
        work = dist.all_reduce(x, group=group, async_op=True)
        fut = work.get_future()
        _expect_raises(fut.wait, "")
        assert work.is_completed() and not work.is_success()
        _expect_raises(work.wait, "")
        _expect_raises(lambda: x.cpu(), "ProcessGroupHCCL::allreduce failed")
        _expect_raises(torch.npu.synchronize, "ProcessGroupHCCL::allreduce failed")
        torch.npu.synchronize()  # reported once
    dist.barrier()
    # reinit_process_group gives the group a new transport: the ranks, out of
    # step on the old one (rank 1 never joined), agree again.
    assert dist.reinit_process_group(group) is group
    y = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(y, group=group)
    _close(y, torch.full((4,), 3.0), "all_reduce after reinit_process_group")


def _mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _train_like_full_batch(
    rank: int, world: int, what: str, wrap: Callable[[torch.nn.Module], torch.nn.Module],
    full: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    """Trains ``wrap(model)`` on this rank's shard of a batch and a reference
    model on the whole batch in this process; the parameters (``full`` gives
    a parameter's whole value) must agree to 1e-5 after every step."""
    dev = torch.device("npu", rank)
    torch.manual_seed(0)
    reference, model = _mlp(), _mlp()
    model.load_state_dict(reference.state_dict())
    trained = wrap(model.to(dev))
    data, target = torch.randn(8 * world, 8), torch.randn(8 * world, 2)
    opt = torch.optim.SGD(trained.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    shard = slice(rank * 8, (rank + 1) * 8)
    for step in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(trained(data[shard].to(dev)), target[shard].to(dev)).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(data), target).backward()
        ref_opt.step()
        for p, q in zip(model.parameters(), reference.parameters()):
            got = full(p).detach().cpu()
            assert torch.allclose(got, q.detach(), atol=1e-5, rtol=0), (
                f"{what}, step {step}: differs from full-batch training by "
                f"{(got - q.detach()).abs().max().item()}")


def check_ddp(rank: int, world: int) -> None:
    """DDP on npu matches single-process full-batch training to 1e-5."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    # A tiny bucket size: several buckets, all-reduced while backward runs.
    _train_like_full_batch(rank, world, "DDP", lambda m: DDP(m, bucket_cap_mb=0.0001), lambda p: p)


def check_fsdp2(rank: int, world: int) -> None:
    """FSDP2 (torch_npu.distributed.fsdp.fully_shard) on npu matches
    single-process full-batch training."""
    from torch_npu.distributed.fsdp import fully_shard

    def shard(model: torch.nn.Module) -> torch.nn.Module:
        for layer in (model[0], model[2]):
            fully_shard(layer)  # all_gather_into_tensor / reduce_scatter_tensor per layer
        return fully_shard(model)

    _train_like_full_batch(rank, world, "FSDP2", shard, lambda p: p.full_tensor())


def check_sync_batchnorm(rank: int, world: int) -> None:
    """nn.SyncBatchNorm (convert_sync_batchnorm) on npu, each rank with its
    shard of a batch, matches BatchNorm on the whole batch in this process:
    outputs, input gradients, summed parameter gradients and running
    statistics, over two training steps, then in eval mode; and
    torch_npu.utils.syncbatchnorm.SyncBatchNorm gives the same."""
    from torch_npu.utils.syncbatchnorm import SyncBatchNorm as NpuSyncBatchNorm

    dev = torch.device("npu", rank)
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.BatchNorm2d(3, momentum=0.3))
    with torch.no_grad():
        reference[0].weight.uniform_(0.5, 1.5)
        reference[0].bias.uniform_(-0.5, 0.5)
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(reference)).to(dev)
    assert isinstance(model[0], torch.nn.SyncBatchNorm)
    shard = slice(rank * 3, (rank + 1) * 3)
    tol = dict(rtol=1e-5, atol=1e-5)
    for step in range(2):
        x = torch.randn(3 * world, 3, 4, 5) * (step + 1) + step
        dy = torch.randn(3 * world, 3, 4, 5)
        xr = x.clone().requires_grad_()
        reference.zero_grad()
        out_ref = reference(xr)
        out_ref.backward(dy)
        xs = x[shard].to(dev).requires_grad_()
        model.zero_grad()
        out = model(xs)
        out.backward(dy[shard].to(dev))
        what = f"SyncBatchNorm, step {step}"
        torch.testing.assert_close(out.detach().cpu(), out_ref[shard].detach(), **tol, msg=what)
        torch.testing.assert_close(xs.grad.cpu(), xr.grad[shard], **tol, msg=what)
        for p, q in ((model[0].weight, reference[0].weight), (model[0].bias, reference[0].bias)):
            grad = p.grad.clone()
            dist.all_reduce(grad)  # what DDP would do
            torch.testing.assert_close(grad.cpu(), q.grad, **tol, msg=what)
        torch.testing.assert_close(model[0].running_mean.cpu(), reference[0].running_mean, **tol)
        torch.testing.assert_close(model[0].running_var.cpu(), reference[0].running_var, **tol)
    model.eval()
    reference.eval()
    x = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(model(x.to(dev)).detach().cpu(), reference(x).detach(), **tol)

    # HCCL's all-gather into a tensor reads flat memory (what SyncBatchNorm's
    # forward relies on): any shapes with the right element counts.
    flat = torch.empty(1, 2 * world, device=dev)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank), device=dev))
    assert flat.cpu().tolist() == [[float(r) for r in range(world) for _ in range(2)]]
    _expect_raises(
        lambda: dist.all_gather_into_tensor(torch.empty(3, device=dev), torch.ones(2, device=dev)),
        f"_allgather_base: expected the output to hold world_size ({world}) times the "
        "elements of the other tensor (2), but got 3 elements")

    # torch_npu's function, applied directly.
    model.train()
    x = torch.randn(3 * world, 3, 4, 5)
    xs = x[shard].to(dev).requires_grad_()
    bn = model[0]
    out = NpuSyncBatchNorm.apply(xs, bn.weight, bn.bias, None, None, bn.eps, 0.1,
                                 dist.group.WORLD, world)
    out.sum().backward()
    xr = x.clone().requires_grad_()
    ref_out = torch.nn.functional.batch_norm(xr, None, None, bn.weight.detach().cpu(),
                                             bn.bias.detach().cpu(), training=True, eps=bn.eps)
    ref_out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref_out[shard].detach(), **tol)
    torch.testing.assert_close(xs.grad.cpu(), xr.grad[shard], **tol)


def run_semantics(rank: int, world: int, store_path: str) -> None:
    _init(rank, world, store_path)
    check_collectives(rank, world)
    check_async_ordering(rank)
    check_side_stream(rank)
    check_coalescing(rank)
    check_refusals(rank)
    check_dtypes_gloo_lacks(rank, world)
    check_ddp(rank, world)
    check_fsdp2(rank, world)
    check_sync_batchnorm(rank, world)
    check_npu_c10d_functions(rank, world)
    check_ephemeral_timeout(rank)
    check_gloo_failure(rank)
    dist.destroy_process_group()
    check_mixed_backends(rank, world, store_path + ".mixed")


def check_mixed_backends(rank: int, world: int, store_path: str) -> None:
    """init_process_group("cpu:gloo,npu:hccl"): each device type its backend."""
    _init(rank, world, store_path, backend="cpu:gloo,npu:hccl")
    c = torch.full((2,), float(rank + 1))
    n = torch.full((2,), float(rank + 1), device=torch.device("npu", rank))
    dist.all_reduce(c)
    dist.all_reduce(n)
    assert c.tolist() == [3.0, 3.0] and n.cpu().tolist() == [3.0, 3.0], (c, n.cpu())
    dist.destroy_process_group()


# --------------------------------------------------------------------------
# torch_npu's versions of torch.distributed functions (2 ranks)
# --------------------------------------------------------------------------


def check_npu_c10d_functions(rank: int, world: int) -> None:
    """batch_isend_irecv, gather, gather_object, sequence numbers and DDP's
    parameter check, as torch_npu.distributed installs them."""
    import torch_npu.distributed.distributed_c10d as npu_c10d

    dev = torch.device("npu", rank)
    peer = 1 - rank
    # One request for the block, through the backend's batch_isend_irecv.
    got = torch.full((3,), -1.0, device=dev)
    ops = [dist.P2POp(dist.irecv, got, peer), dist.P2POp(dist.isend, torch.full((3,), rank + 1.0, device=dev), peer)]
    reqs = dist.batch_isend_irecv(ops)
    assert len(reqs) == 1, reqs
    reqs[0].wait()
    _close(got, torch.full((3,), peer + 1.0), "batch_isend_irecv")
    _expect_raises(lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(2, device=dev), peer),
                                                   dist.P2POp(dist.irecv, torch.ones(2), peer)]),
                   "No backend type associated with device type cpu")

    out = [torch.empty(2, device=dev) for _ in range(world)] if rank == 1 else None
    work = dist.gather(torch.full((2,), 10.0 + rank, device=dev), out, dst=1, async_op=True)
    work.wait()
    if rank == 1:
        for i, o in enumerate(out):
            _close(o, torch.full((2,), 10.0 + i), "gather to rank 1")
    objs = [None] * world if rank == 0 else None
    dist.gather_object({"rank": rank, "pad": "x" * (50 * rank)}, objs, dst=0)  # sizes differ
    if rank == 0:
        assert objs == [{"rank": i, "pad": "x" * (50 * i)} for i in range(world)], objs

    pg = dist.distributed_c10d._get_default_group()
    seq = pg._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(1, device=dev))
    assert pg._get_sequence_number_for_group() == seq + 1
    seqs: List[object] = [None] * world
    dist.all_gather_object(seqs, seq)
    assert seqs == [seq] * world, f"sequence numbers differ across ranks: {seqs}"

    same = [torch.ones(4, 2, device=dev), torch.ones(3, device=dev)]
    npu_c10d_verify = torch_npu.distributed._verify_params_across_processes
    npu_c10d_verify(pg, same)
    # Rank 1 differs from rank 0: it raises, rank 0 (the reference) does not.
    for params, message in (
        ([torch.ones(4, 2, device=dev), torch.ones(3 + rank, device=dev)],
         "params[1] in this process with sizes [4] appears not to match sizes of the same param "
         "in process 0"),
        (same[: 1 + rank],
         "DDP expects same model across all ranks, but Rank 1 has 2 params, while rank 0 has "
         "inconsistent 1 params."),
    ):
        if rank == 1:
            _expect_raises(lambda: npu_c10d_verify(pg, params), message)
        else:
            npu_c10d_verify(pg, params)
    assert npu_c10d.is_hccl_available()


def check_ephemeral_timeout(rank: int) -> None:
    """_add_ephemeral_timeout_for_all_pgs: a peer later than the group's
    timeout does not fail the first collective after it; the group's own
    timeout applies again once that one completed."""
    import threading

    timeout = datetime.timedelta(seconds=2)
    group = dist.new_group([0, 1], timeout=timeout)
    backend = group._get_backend(torch.device("npu"))
    dev = torch.device("npu", rank)
    dist.distributed_c10d._add_ephemeral_timeout_for_all_pgs(datetime.timedelta(seconds=120))
    assert backend.transport.options._timeout == timeout + datetime.timedelta(seconds=120)
    if rank == 1:
        # Join 3 s late: past the group's 2 s, well within the extension.
        threading.Event().wait(3.0)
    x = torch.full((2,), rank + 1.0, device=dev)
    work = dist.all_reduce(x, group=group, async_op=True)
    # Completed as a Work (its Future), not only as data the host can read: the
    # comm thread marks the collective complete after the stream passed it.
    work.get_future().wait()
    _close(x, torch.full((2,), 3.0), "all_reduce with a late peer under an ephemeral timeout")
    y = torch.ones(2, device=dev)
    dist.all_reduce(y, group=group)  # the first call after completion resets it
    _close(y, torch.full((2,), 2.0), "all_reduce after the ephemeral timeout")
    assert backend.transport.options._timeout == timeout
