"""Worker functions of test_rpc.py, run in spawned processes (2 ranks).

Rank r is ``worker<r>`` on npu:r. One spawn checks everything: the hccl
gradients of torch.distributed.nn.functional first (one process group), then
RPC with the NPU_TENSORPIPE backend (one agent), because starting processes
and agents is what costs. A failed check raises, and torch.multiprocessing
reports the rank's traceback.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.distributed.rpc as rpc
import torch_npu
from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

from dist_workers import _close, _expect_raises, _slow_stream

TIMEOUT = datetime.timedelta(seconds=60)


# --------------------------------------------------------------------------
# torch.distributed.nn.functional with hccl: forward and backward
# --------------------------------------------------------------------------


def check_nn_functional(rank: int, world: int, store_path: str) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group(
        "hccl", init_method=f"file://{store_path}", rank=rank, world_size=world, timeout=TIMEOUT
    )
    dev = torch.device("npu", rank)
    r1 = float(rank + 1)
    total = float(sum(range(1, world + 1)))

    # _all_gather_base: the gradient torch computes only for NCCL/XCCL.
    x = torch.full((2, 3), r1, device=dev, requires_grad=True)
    out = torch.empty(2 * world, 3, device=dev)
    gathered = dist_fn._all_gather_base(out, x)
    _close(gathered, torch.cat([torch.full((2, 3), float(i + 1)) for i in range(world)]), "_all_gather_base")
    weights = torch.arange(2.0 * world, device=dev).unsqueeze(1).expand(2 * world, 3) * r1
    (gathered * weights).sum().backward()
    # d/dx_r = sum over ranks q of q's weights at r's rows.
    rows = torch.arange(2.0 * world)[2 * rank : 2 * rank + 2].unsqueeze(1).expand(2, 3)
    _close(x.grad, rows * total, "_all_gather_base backward")
    assert x.grad.device == dev, x.grad.device

    # all_gather (a tuple of tensors), all_reduce, reduce_scatter.
    x = torch.full((3,), r1, device=dev, requires_grad=True)
    parts = dist_fn.all_gather(x)
    assert len(parts) == world
    for i, p in enumerate(parts):
        _close(p, torch.full((3,), float(i + 1)), "all_gather")
    sum(p * (i + 1) for i, p in enumerate(parts)).sum().backward()
    # Rank r's slot has weight r+1 on every rank: the gradient sums it.
    _close(x.grad, torch.full((3,), (rank + 1.0) * world), "all_gather backward")

    x = torch.full((3,), r1, device=dev, requires_grad=True)
    y = dist_fn.all_reduce(x * 2)
    _close(y, torch.full((3,), 2 * total), "all_reduce")
    (y * r1).sum().backward()
    _close(x.grad, torch.full((3,), 2 * total), "all_reduce backward")

    inputs = [torch.full((2,), r1 * (i + 1), device=dev, requires_grad=True) for i in range(world)]
    out = torch.empty(2, device=dev)
    y = dist_fn.reduce_scatter(out, inputs)
    _close(y, torch.full((2,), total * (rank + 1)), "reduce_scatter")
    (y * r1).sum().backward()
    for i, t in enumerate(inputs):
        # Input i went to rank i, whose loss weight is i+1.
        _close(t.grad, torch.full((2,), i + 1.0), "reduce_scatter backward")

    # A first dimension that does not divide by the world size.
    from torch_npu.distributed.nn.functional import _allgather_base_backward_hccl

    class _Ctx:
        group = None

    _expect_raises(
        lambda: _allgather_base_backward_hccl(_Ctx(), torch.ones(2 * world + 1, device=dev)),
        "not have first dimension divisible by world_size",
    )
    dist.destroy_process_group()


# --------------------------------------------------------------------------
# RPC with npu tensors (NPU_TENSORPIPE)
# --------------------------------------------------------------------------


def _device_and_value(t: torch.Tensor) -> tuple[str, list[float]]:
    return str(t.device), t.cpu().tolist()


def _twice(t: torch.Tensor) -> torch.Tensor:
    return t * 2


def _twice_slowly(t: torch.Tensor) -> torch.Tensor:
    # Runs on the callee's receiving stream: the product is still queued
    # when the function returns, and must be what is sent back.
    stream = torch.npu.current_stream()
    with _slow_stream(stream, 20_000):
        return t * 2


def _npu_tensor_on(index: int) -> torch.Tensor:
    return torch.ones(2, device=torch.device("npu", index))


@torch.jit.script
def _scripted_add(t: torch.Tensor, other: float) -> torch.Tensor:
    return t + other


def check_rpc(rank: int, world: int, store_path: str) -> None:
    torch.npu.set_device(rank)
    init = f"file://{store_path}"
    if rank == 0:
        options = NPUTensorPipeRpcBackendOptions(init_method=init, rpc_timeout=60)
        options.set_device_map("worker1", {"npu:0": "npu:1"})
    else:
        options = NPUTensorPipeRpcBackendOptions(init_method=init, rpc_timeout=60)
    rpc.init_rpc(
        f"worker{rank}",
        rank=rank,
        world_size=world,
        backend=rpc.backend_registry.BackendType.NPU_TENSORPIPE,
        rpc_backend_options=options,
    )
    assert isinstance(rpc.api._get_current_rpc_agent(), torch_npu._C._distributed_rpc.TensorPipeAgent)
    if rank == 0:
        check_rpc_caller()
    else:
        # worker1 has no device map: its npu tensors cannot leave.
        _expect_raises(
            lambda: rpc.rpc_sync("worker0", torch.add, args=(torch.ones(2, device="npu:1"), 1)),
            "TensorPipe RPC backend only supports CPU tensors by default",
            "Request device mapping is not available for destination worker0",
        )
    rpc.shutdown()


def check_rpc_caller() -> None:
    x = torch.arange(4.0, device="npu:0")
    # Builtin op: the argument lands on npu:1 (the map), the result comes
    # back to npu:0 (the reverse map).
    y = rpc.rpc_sync("worker1", torch.add, args=(x, 1))
    assert y.device == torch.device("npu:0"), y.device
    _close(y, torch.arange(4.0) + 1, "rpc_sync(torch.add)")
    # Python function: where the callee sees its argument.
    device, value = rpc.rpc_sync("worker1", _device_and_value, args=(x,))
    assert (device, value) == ("npu:1", [0.0, 1.0, 2.0, 3.0]), (device, value)
    fut = rpc.rpc_async("worker1", _twice, args=(x,))
    y = fut.wait()
    assert y.device == torch.device("npu:0"), y.device
    _close(y, torch.arange(4.0) * 2, "rpc_async")
    rref = rpc.remote("worker1", torch.mul, args=(x, 3))
    y = rref.to_here()
    assert y.device == torch.device("npu:0"), y.device
    _close(y, torch.arange(4.0) * 3, "remote().to_here()")
    assert rref.rpc_sync().size() == torch.Size([4])
    # TorchScript function.
    y = rpc.rpc_sync("worker1", _scripted_add, args=(x, 0.5))
    assert y.device == torch.device("npu:0"), y.device
    _close(y, torch.arange(4.0) + 0.5, "rpc_sync(TorchScript)")
    # CPU tensors travel as before.
    y = rpc.rpc_sync("worker1", torch.add, args=(torch.ones(2), 1))
    assert y.device.type == "cpu" and y.tolist() == [2.0, 2.0], y

    check_rpc_stream_order()
    check_rpc_refusals()


def check_rpc_stream_order() -> None:
    """The sender's pending work is in what is sent; a received tensor is
    ready on the receiver's current stream."""
    stream = torch.npu.Stream()
    with torch.npu.stream(stream):
        x = torch.zeros(1 << 16, device="npu:0")
        with _slow_stream(stream, 20_000):
            x.fill_(7.0)  # still queued when the RPC starts
            y = rpc.rpc_async("worker1", _twice, args=(x,)).wait()
        y.add_(1)  # on the current stream, after the received data
        assert float(y.min().cpu()) == float(y.max().cpu()) == 15.0, (y.min(), y.max())
        # The callee's result, still queued on its stream when it returns.
        y = rpc.rpc_sync("worker1", _twice_slowly, args=(x,))
        assert float(y.min().cpu()) == float(y.max().cpu()) == 14.0, (y.min(), y.max())


def check_rpc_refusals() -> None:
    x = torch.ones(2, device="npu:0")
    # No device map to worker0 itself.
    _expect_raises(
        lambda: rpc.rpc_sync("worker0", torch.add, args=(x, 1)),
        "TensorPipe RPC backend only supports CPU tensors by default",
        "Request device mapping is not available for destination worker0",
    )
    # A tensor on a device the map does not name.
    _expect_raises(
        lambda: rpc.rpc_sync("worker1", torch.add, args=(torch.ones(2, device="npu:1"), 1)),
        "Request device mapping is not available for destination worker1",
    )
    # The callee returns a tensor on a device its agent does not use (npu:0
    # of worker1; only npu:1 maps back): torch's error, as for CUDA.
    _expect_raises(
        lambda: rpc.rpc_sync("worker1", _npu_tensor_on, args=(0,)),
        "The result contained tensors residing on device(s) npu:0 which are not among the "
        "expected device(s) npu:1",
    )
    y = rpc.rpc_sync("worker1", _npu_tensor_on, args=(1,))
    assert y.device == torch.device("npu:0") and y.cpu().tolist() == [1.0, 1.0], y


def run_all(rank: int, world: int, store_path: str) -> None:
    check_nn_functional(rank, world, store_path + ".pg")
    check_rpc(rank, world, store_path + ".rpc")
