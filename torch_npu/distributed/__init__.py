"""torch.distributed's ``"hccl"`` backend for npu tensors (``torch_npu.distributed``).

Importing torch_npu registers the backend, so that
``torch.distributed.init_process_group("hccl")``,
``init_process_group(backend="cpu:gloo,npu:hccl")`` and torchrun work as
with torch_npu. Collectives on npu tensors are ordered on NPU streams like
torch_npu's ProcessGroupHCCL (docs/DISTRIBUTED.md); the data travels through
a gloo process group built from the same store, rank, size and timeout, so
the same program runs across machines with torchrun's rendezvous.
"""

from datetime import timedelta

import torch
import torch.distributed as dist

from .. import _C

__all__ = ["is_hccl_available", "ProcessGroupHCCL"]

ProcessGroupHCCL = _C._distributed.ProcessGroupHCCL


def is_hccl_available() -> bool:
    r"""Return True: the ``"hccl"`` backend is registered with torch.distributed."""
    return hasattr(dist.Backend, "HCCL")


def _create_process_group_hccl(
    store: dist.Store, rank: int, size: int, timeout: timedelta
) -> ProcessGroupHCCL:
    r"""Creator that torch.distributed calls for an ``"hccl"`` group.

    Builds the gloo transport from the same store (torch.distributed already
    prefixed it for this group and device), rank, size and timeout; gloo
    chooses its network interface as for a ``"gloo"`` group
    (``GLOO_SOCKET_IFNAME``, else the address the host name resolves to).
    """
    transport = dist.ProcessGroupGloo(store, rank, size, timeout)
    return ProcessGroupHCCL(transport, rank, size)


def _register() -> None:
    if not dist.is_available() or is_hccl_available():
        return
    dist.Backend.register_backend("hccl", _create_process_group_hccl, devices=["npu"])


_register()
