"""torch.distributed's ``"hccl"`` backend for npu tensors (``torch_npu.distributed``).

Importing torch_npu registers the backend, so that
``torch.distributed.init_process_group("hccl")``,
``init_process_group(backend="cpu:gloo,npu:hccl")`` and torchrun work as
with torch_npu. Collectives on npu tensors are ordered on NPU streams like
torch_npu's ProcessGroupHCCL (docs/DISTRIBUTED.md); the data travels through
a gloo process group built from the same store, rank, size and timeout, so
the same program runs across machines with torchrun's rendezvous.

As torch_npu does, importing it also puts torch_npu's versions of a few
torch.distributed functions in place (``distributed_c10d``): they serve hccl
groups and hand everything else to PyTorch's; gives
``torch.distributed.nn.functional``'s all-gather a gradient with hccl
(``nn.functional``); and registers the ``NPU_TENSORPIPE`` RPC backend
(``rpc``).
"""

from typing import Optional

import torch
import torch.distributed as dist

from .._C._distributed_c10d import ParallelStore, ProcessGroupHCCL
from . import distributed_c10d, nn, rpc
from ._verify_params import _verify_params_across_processes
from .distributed_c10d import is_hccl_available, reinit_process_group

__all__ = ["is_hccl_available", "reinit_process_group", "ProcessGroupHCCL"]


def _new_process_group_hccl_helper(
    dist_backend_opts: "torch._C._distributed_c10d._DistributedBackendOptions",
    pg_options: Optional[ProcessGroupHCCL.Options],
) -> ProcessGroupHCCL:
    r"""Creator that torch.distributed calls for an ``"hccl"`` group (torch_npu's name).

    ``pg_options`` is ``init_process_group``'s (or ``new_group``'s)
    ``pg_options``: a :class:`ProcessGroupHCCL.Options` or None. As in
    torch_npu, its ``_timeout`` becomes the group's timeout and the group's
    ranks and id are recorded in it. The transport, a ProcessGroupGloo, is
    built from the same store (already prefixed for this group and device),
    rank, size and timeout; gloo chooses its network interface as for a
    ``"gloo"`` group (``GLOO_SOCKET_IFNAME``, else the host name's address).
    """
    if pg_options is None:
        pg_options = ProcessGroupHCCL.Options()
    elif not isinstance(pg_options, ProcessGroupHCCL.Options):
        raise TypeError(
            "init_process_group: expected pg_options of an hccl group to be a "
            "torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options, but got "
            f"{type(pg_options).__name__}"
        )
    pg_options._timeout = dist_backend_opts.timeout
    pg_options.global_ranks_in_group = list(dist_backend_opts.global_ranks_in_group)
    pg_options.group_id = dist_backend_opts.group_id
    return ProcessGroupHCCL(
        dist_backend_opts.store, dist_backend_opts.group_rank, dist_backend_opts.group_size, pg_options
    )


def _register() -> None:
    if not dist.is_available() or is_hccl_available():
        return
    dist.Backend.register_backend(
        "hccl", _new_process_group_hccl_helper, extended_api=True, devices=["npu"]
    )


def _install() -> None:
    r"""Put torch_npu's versions of torch.distributed functions in place, where
    torch_npu puts them (its ``distributed_patches``)."""
    c10d = dist.distributed_c10d
    npu_c10d = distributed_c10d
    torch._C._distributed_c10d._verify_params_across_processes = _verify_params_across_processes
    # DDP calls it through torch.distributed, which imported it before.
    dist._verify_params_across_processes = _verify_params_across_processes
    torch._C._distributed_c10d.ProcessGroup._get_sequence_number_for_group = (
        npu_c10d._hccl_get_sequence_number_for_group
    )
    c10d._add_ephemeral_timeout_for_all_pgs = npu_c10d._hccl_add_ephemeral_timeout_for_all_pgs
    for module in (dist, c10d):
        module.batch_isend_irecv = npu_c10d._batch_isend_irecv
        module.gather = npu_c10d._gather
        module.gather_object = npu_c10d._gather_object
    dist.is_hccl_available = is_hccl_available
    dist.reinit_process_group = reinit_process_group
    torch.distributed.nn.functional._AllGatherBase.backward = staticmethod(  # type: ignore[method-assign]
        nn.functional._allgather_base_backward_hccl
    )


_register()
_install()
