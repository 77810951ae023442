"""Makes ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler`` torch_npu's
npu scaler (:class:`torch_npu.npu.amp.sharded_grad_scaler._ShardedGradScaler`), as
torch_npu does, without importing FSDP at ``import torch_npu``.

torch_npu replaces PyTorch's class at import, which means importing FSDP (over a
second here) in every process. Instead, :func:`install` patches the module the
moment a program imports it: at once if it is loaded already, else right after
the module executed (``torch_npu.utils._import_hooks``). Code written for torch_npu
(``ShardedGradScaler()`` with its default device) then scales on npu.
"""

import importlib
import sys

from ...utils._import_hooks import run_after_import

__all__ = []

_TARGET = "torch.distributed.fsdp.sharded_grad_scaler"
_OURS = "torch_npu.npu.amp.sharded_grad_scaler"


def _patch_loaded() -> None:
    # Our module patches the target itself at its end (it imports the target,
    # so it may be mid-import right now).
    if _OURS not in sys.modules:
        importlib.import_module(_OURS)


def install() -> None:
    r"""Patch PyTorch's FSDP scaler now if it is imported, else when it is."""
    run_after_import(_TARGET, _patch_loaded)
