r"""``torch_npu.optim``: torch_npu's fused optimizers.

Each optimizer combines the storages of its parameters, gradients and states
into one buffer per dtype (``torch_npu.utils.npu_combine_tensors``) and
updates all parameters of a group with a few ops on the buffers, queued on
the current stream like any op. See ``NpuFusedOptimizerBase`` for what
combining means for the program's tensors.

``import torch_npu`` imports this package, as torch_npu does; the optimizer
modules themselves are imported on first use (``from torch_npu.optim import
NpuFusedAdam``, ``torch_npu.optim.NpuFusedAdam``), which keeps them out of the
import time of programs that never use them.
"""

import importlib
from typing import TYPE_CHECKING

__all__ = [
    "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb",
    "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP",
    "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF",
]

# Public name -> the module (torch_npu's file names) that defines it.
_MODULES = {
    "NpuFusedOptimizerBase": "npu_fused_optim_base",
    "NpuFusedSGD": "npu_fused_sgd",
    "NpuFusedAdadelta": "npu_fused_adadelta",
    "NpuFusedLamb": "npu_fused_lamb",
    "NpuFusedAdam": "npu_fused_adam",
    "NpuFusedAdamW": "npu_fused_adamw",
    "NpuFusedAdamP": "npu_fused_adamp",
    "NpuFusedBertAdam": "npu_fused_bert_adam",
    "NpuFusedRMSprop": "npu_fused_rmsprop",
    "NpuFusedRMSpropTF": "npu_fused_rmsprop_tf",
    "_DistributedMuon": "distributed_muon",  # imports torch.distributed.tensor
}

if TYPE_CHECKING:
    from .npu_fused_adadelta import NpuFusedAdadelta
    from .npu_fused_adam import NpuFusedAdam
    from .npu_fused_adamp import NpuFusedAdamP
    from .npu_fused_adamw import NpuFusedAdamW
    from .npu_fused_bert_adam import NpuFusedBertAdam
    from .npu_fused_lamb import NpuFusedLamb
    from .npu_fused_optim_base import NpuFusedOptimizerBase
    from .npu_fused_rmsprop import NpuFusedRMSprop
    from .npu_fused_rmsprop_tf import NpuFusedRMSpropTF
    from .npu_fused_sgd import NpuFusedSGD
    from .distributed_muon import _DistributedMuon


def __getattr__(name: str) -> object:
    r"""Import an optimizer's module on first use."""
    module = _MODULES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'torch_npu.optim' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
