"""torch_npu's versions of torch.distributed functions (``torch_npu.distributed.distributed_c10d``).

torch_npu replaces these PyTorch functions at import (``torch_npu.distributed``
installs them, see ``_install``): each one serves groups whose npu backend is
the ``"hccl"`` one with that backend's own calls, and hands every other call
to PyTorch's function unchanged.
"""

import logging
from datetime import timedelta
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d
from torch._C._distributed_c10d import ProcessGroup

from .._C._distributed_c10d import ProcessGroupHCCL

__all__ = ["is_hccl_available", "reinit_process_group"]

logger = logging.getLogger("torch.distributed")

_NPU = torch.device("npu")

# PyTorch's functions, taken before _install replaces them: calls that do not
# involve an hccl group go there.
_torch_batch_isend_irecv = _c10d.batch_isend_irecv
_torch_gather = _c10d.gather
_torch_gather_object = _c10d.gather_object
_torch_add_ephemeral_timeout_for_all_pgs = _c10d._add_ephemeral_timeout_for_all_pgs
_torch_get_sequence_number_for_group = ProcessGroup._get_sequence_number_for_group


def _hccl_backend(group: Optional[ProcessGroup]) -> Optional[ProcessGroupHCCL]:
    r"""The ProcessGroupHCCL serving npu tensors in ``group`` (None: the
    default group), or None if that is not an hccl backend."""
    if group is None or group is _c10d.GroupMember.WORLD:
        if not dist.is_initialized():
            return None
        group = _c10d._get_default_group()
    if not isinstance(group, ProcessGroup) or _NPU not in group._device_types:
        return None
    backend = group._get_backend(_NPU)
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps backends in a checking wrapper.
    backend = getattr(backend, "wrapped_pg", backend)
    return backend if isinstance(backend, ProcessGroupHCCL) else None


def _group_and_root(
    group: Optional[ProcessGroup], dst: Optional[int], group_dst: Optional[int]
) -> Tuple[ProcessGroup, int]:
    r"""The group (None: the default one) and the group rank of the root given
    as a global rank (``dst``, default 0) or a group rank (``group_dst``)."""
    pg = group if group is not None and group is not _c10d.GroupMember.WORLD else _c10d._get_default_group()
    if dst is None and group_dst is None:
        dst = 0
    return pg, _c10d._canonicalize_group_rank(pg, dst, group_dst, return_global=False)


def is_hccl_available() -> bool:
    r"""Return True if the ``"hccl"`` backend is registered with torch.distributed."""
    return "hccl" in dist.Backend.backend_list


def _batch_isend_irecv(p2p_op_list: List[dist.P2POp]) -> List[dist.Work]:
    r"""``torch.distributed.batch_isend_irecv`` as torch_npu has it.

    On npu tensors of an hccl group, the operations go to the backend's
    ``batch_isend_irecv`` as one block, and the one request returned covers
    them all. Other groups and devices take PyTorch's path.
    """
    _c10d._check_p2p_op_list(p2p_op_list)
    first = p2p_op_list[0]
    backend = _hccl_backend(first.group) if first.tensor.device.type == "npu" else None
    if backend is None:
        return _torch_batch_isend_irecv(p2p_op_list)
    for op in p2p_op_list:
        if op.tensor.device.type != "npu":
            raise RuntimeError(
                f"No backend type associated with device type {op.tensor.device.type}: "
                "batch_isend_irecv on an hccl group takes npu tensors only"
            )
        if op.op not in (dist.isend, dist.irecv):
            raise ValueError(
                "batch_isend_irecv: expected torch.distributed.isend or irecv as P2POp.op, "
                f"but got {getattr(op.op, '__name__', op.op)!r}"
            )
    if _c10d._rank_not_in_group(first.group):
        return []
    op_types = [op.op.__name__ for op in p2p_op_list]
    tensors = [op.tensor for op in p2p_op_list]
    peers = [op.group_peer for op in p2p_op_list]
    return [backend.batch_isend_irecv(op_types, tensors, peers)]


def _gather(
    tensor: torch.Tensor,
    gather_list: Optional[List[torch.Tensor]] = None,
    dst: Optional[int] = None,
    group: Optional[ProcessGroup] = None,
    async_op: bool = False,
    group_dst: Optional[int] = None,
) -> Optional[dist.Work]:
    r"""``torch.distributed.gather`` as torch_npu has it.

    torch_npu's HCCL has no gather and emulates it with an all_gather; the
    simulator's hccl backend has one, so an npu tensor of an hccl group is
    gathered by the backend's ``gather`` (torch_npu's "compatible" path). The
    arguments and their checks are PyTorch's; other calls take PyTorch's path.
    """
    backend = _hccl_backend(group) if isinstance(tensor, torch.Tensor) and tensor.is_npu else None
    if backend is None:
        return _torch_gather(tensor, gather_list, dst, group, async_op, group_dst)
    _c10d._check_single_tensor(tensor, "tensor")
    gather_list = gather_list or []
    if gather_list:
        _c10d._check_tensor_list(gather_list, "gather_list")
    _c10d._ensure_all_tensors_same_dtype(tensor, gather_list)
    if _c10d._rank_not_in_group(group):
        _c10d._warn_not_in_group("gather")
        return None
    pg, group_dst = _group_and_root(group, dst, group_dst)
    _c10d._validate_output_list_for_rank(pg.rank(), group_dst, gather_list)
    opts = dist.GatherOptions()
    opts.rootRank = group_dst
    opts.asyncOp = async_op
    outputs = [gather_list] if pg.rank() == group_dst else []
    work = backend.gather(outputs, [tensor], opts)
    if async_op:
        return work
    work.wait()
    return None


def _gather_object(
    obj: Any,
    object_gather_list: Optional[List[Any]] = None,
    dst: Optional[int] = None,
    group: Optional[ProcessGroup] = None,
    group_dst: Optional[int] = None,
) -> None:
    r"""``torch.distributed.gather_object`` as torch_npu has it: on an hccl
    group the pickled objects travel as npu tensors through :func:`_gather`.
    Other groups take PyTorch's path."""
    if _hccl_backend(group) is None or _c10d._get_object_coll_device(group) != "npu":
        return _torch_gather_object(obj, object_gather_list, dst, group, group_dst)
    if _c10d._rank_not_in_group(group):
        _c10d._warn_not_in_group("gather_object")
        return None
    pg, group_dst = _group_and_root(group, dst, group_dst)
    rank, size = pg.rank(), pg.size()
    _c10d._validate_output_list_for_rank(rank, group_dst, object_gather_list)
    device = torch.device("npu", torch.npu.current_device())
    data, length = _c10d._object_to_tensor(obj, device, pg)
    # Every rank sends the same number of bytes (gather's contract): the
    # longest object's, so the lengths go round first.
    lengths = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(size)]
    dist.all_gather(lengths, length, group=pg)
    longest = int(max(t.item() for t in lengths))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    gathered = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(size)] if rank == group_dst else None
    _gather(padded, gathered, group=pg, group_dst=group_dst)
    if rank != group_dst:
        return None
    assert object_gather_list is not None  # checked by _validate_output_list_for_rank
    for i, (buf, n) in enumerate(zip(gathered, lengths)):
        object_gather_list[i] = _c10d._tensor_to_object(buf, int(n.item()), pg)
    return None


def reinit_process_group(group: Optional[ProcessGroup] = None, rebuild_link: bool = True) -> Optional[ProcessGroup]:
    r"""Rebuild the communication of a process group after a failure (torch_npu's API).

    torch_npu aborts the group's HCCL communicators and builds new ones at the
    next collective. Here the group's transport (the gloo backend that carries
    its data) is replaced by a new one, so a group whose collective failed or
    timed out works again. Every rank of the group calls it, at the same point
    of its program: the new transport connects to the peers right away.

    Args:
        group: the group (default: the default group). Groups without an hccl
            backend are returned unchanged.
        rebuild_link: if False, resume the communicators instead of rebuilding
            them (torch_npu's ``HcclCommResume`` after a device fault paused
            them): the simulator's transports are never paused, so there is
            nothing to resume, and None is returned as in torch_npu.

    Returns:
        ``group``, or None when ``rebuild_link`` is False.
    """
    if not isinstance(rebuild_link, bool):
        raise TypeError(f"reinit_process_group: expected rebuild_link to be a bool, but got {type(rebuild_link).__name__}")
    if group is None or group is _c10d.GroupMember.WORLD:
        group = _c10d._get_default_group()  # raises if there is none
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"reinit_process_group: expected a ProcessGroup, but got {type(group).__name__}")
    logger.info("reinit process group, group=%s, rebuild link=%s", group.group_name, rebuild_link)
    if not rebuild_link:
        return None
    backend = _hccl_backend(group)
    if backend is not None:
        backend._rebuild_transport()
    return group


def _hccl_get_sequence_number_for_group(self: ProcessGroup) -> int:
    r"""``ProcessGroup._get_sequence_number_for_group``: an hccl group's
    count of collectives (PyTorch's method refuses custom backends)."""
    backend = _hccl_backend(self)
    if backend is None:
        return _torch_get_sequence_number_for_group(self)
    return backend._get_sequence_number_for_group()


def _hccl_add_ephemeral_timeout_for_all_pgs(timeout: timedelta) -> None:
    r"""Extend the timeout of every group's next collectives on this rank.

    For each hccl group, the collectives called from now on get ``timeout``
    more, until the first of them completed (then the group's timeout applies
    again). Groups of other backends are handled by PyTorch's function (NCCL).

    Args:
        timeout (timedelta): the extension.
    """
    if not isinstance(timeout, timedelta):
        raise TypeError(f"_add_ephemeral_timeout_for_all_pgs: expected a datetime.timedelta, but got {type(timeout).__name__}")
    for pg in _c10d._world.pg_map:
        backend = _hccl_backend(pg)
        if backend is not None:
            backend._add_ephemeral_timeout(timeout)
    _torch_add_ephemeral_timeout_for_all_pgs(timeout)
