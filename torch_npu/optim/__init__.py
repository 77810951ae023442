r"""``torch_npu.optim``: torch_npu's fused optimizers.

Each optimizer combines the storages of its parameters, gradients and states
into one buffer per dtype (``torch_npu.utils.npu_combine_tensors``) and
updates all parameters of a group with a few ops on the buffers, queued on
the current stream like any op. See ``NpuFusedOptimizerBase`` for what
combining means for the program's tensors.
"""

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

__all__ = [
    "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb",
    "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP",
    "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF",
]


def __getattr__(name: str) -> object:
    r"""torch_npu's ``_DistributedMuon`` is not provided: say so rather than "no attribute"."""
    if name == "_DistributedMuon":
        raise NotImplementedError(
            "torch_npu.optim._DistributedMuon (Muon with Newton-Schulz over DTensor shards) is not "
            "implemented on the simulated NPU yet; use torch.optim.Muon for unsharded parameters."
        )
    raise AttributeError(f"module 'torch_npu.optim' has no attribute {name!r}")
