"""Gradients of ``torch.distributed.nn.functional``'s collectives with the ``"hccl"`` backend.

torch's ``_AllGatherBase`` (behind ``torch.distributed.nn.functional._all_gather_base``)
computes its gradient only for NCCL and XCCL groups; as torch_npu does, importing
torch_npu replaces its ``backward`` with :func:`_allgather_base_backward_hccl`,
which also serves hccl groups (and hands every other group to torch's). The other
collectives of that module (``all_gather``, ``all_reduce``, ``reduce_scatter``, ...)
have backward passes made of collectives and need nothing.
"""

from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.nn.functional import _AllGatherBase

__all__: list[str] = []

# torch's, for the groups it serves (and its error for the others).
_torch_allgather_base_backward = _AllGatherBase.backward


def _uses_hccl(group: Optional[dist.ProcessGroup]) -> bool:
    # "hccl", or a per-device backend string such as "cpu:gloo,npu:hccl".
    backend = str(dist.get_backend(group))
    return backend == "hccl" or "npu:hccl" in backend.split(",")


def _allgather_base_backward_hccl(ctx: Any, grad_output: torch.Tensor) -> tuple[None, torch.Tensor, None]:
    r"""Backward of ``_AllGatherBase`` (an all-gather along the first dimension):
    each rank's gradient is the sum over ranks of its slice of ``grad_output``,
    a reduce-scatter. Raises ``RuntimeError`` if the first dimension does not
    divide by the group's size."""
    if not _uses_hccl(ctx.group):
        return _torch_allgather_base_backward(ctx, grad_output)
    world_size = dist.get_world_size(group=ctx.group)
    out_size = list(grad_output.size())
    if out_size[0] % world_size != 0:
        raise RuntimeError(
            f"Tensor with dimensions: {out_size} does "
            f"not have first dimension divisible by world_size: {world_size}"
        )
    out_size[0] //= world_size
    grad_input = torch.empty(out_size, device=grad_output.device, dtype=grad_output.dtype)
    dist.reduce_scatter_tensor(
        grad_input, grad_output.contiguous(), dist.ReduceOp.SUM, group=ctx.group
    )
    return (None, grad_input, None)
