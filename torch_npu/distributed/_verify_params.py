"""``_verify_params_across_processes``: DDP's check that every rank holds the same model.

torch_npu binds its own version (``torch_npu._C._distributed_c10d``) and puts
it in ``torch._C._distributed_c10d``; DDP calls it through
``torch.distributed._verify_params_across_processes`` when it wraps a module.
"""

from typing import List, Optional

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

from . import distributed_c10d as _npu_c10d

__all__: List[str] = []

# PyTorch's, for parameters that are not npu tensors of an hccl group.
_torch_verify_params_across_processes = torch._C._distributed_c10d._verify_params_across_processes


def _fail(message: str, logger: Optional[object]) -> None:
    if logger is not None:
        logger.set_error_and_log(message)  # records the error in DDP's logging data
    raise RuntimeError(message)


def _verify_params_across_processes(
    process_group: ProcessGroup, params: List[torch.Tensor], logger: Optional[object] = None
) -> None:
    r"""Raise unless every rank of ``process_group`` has parameters of the
    same count, sizes and strides as rank 0's (torch_npu's messages).

    On npu parameters of an hccl group, rank 0's description is broadcast as
    an npu tensor through the group's hccl backend; other calls go to
    PyTorch's function.

    Args:
        process_group: the group DDP runs over.
        params: this rank's parameters (and buffers), in module order.
        logger: DDP's ``Logger``; the error is recorded there before raising.
    """
    backend = _npu_c10d._hccl_backend(process_group)
    if backend is None or not params or not params[0].is_npu:
        return _torch_verify_params_across_processes(process_group, params, logger)
    device = params[0].device
    # Rank 0's parameter count and description length first: the
    # description itself can only be broadcast once every rank knows its size.
    description = []
    for p in params:
        description += [*p.shape, *p.stride()]
    header = torch.tensor([len(params), len(description)], dtype=torch.long, device=device)
    process_group.broadcast(header, 0).wait()
    count, length = header.tolist()
    # Both broadcasts happen on every rank before any check raises, so a rank
    # that fails leaves no peer waiting in a collective.
    reference = torch.tensor(description, dtype=torch.long, device=device)
    if length != len(description):
        reference = torch.empty(length, dtype=torch.long, device=device)  # the shapes differ
    if length:  # every rank knows rank 0's length: all skip an empty broadcast alike
        process_group.broadcast(reference, 0).wait()
    reference = reference.tolist()
    if count != len(params):
        _fail(
            f"DDP expects same model across all ranks, but Rank {process_group.rank()} has "
            f"{len(params)} params, while rank 0 has inconsistent {count} params.",
            logger,
        )
    at = 0
    for i, p in enumerate(params):
        for what, values in (("sizes", list(p.shape)), ("strides", list(p.stride()))):
            if values != reference[at : at + len(values)]:
                _fail(
                    f"params[{i}] in this process with sizes {list(p.shape)} appears not to "
                    f"match {what} of the same param in process 0.",
                    logger,
                )
            at += len(values)
