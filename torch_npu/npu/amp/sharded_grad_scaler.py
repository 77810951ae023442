"""``torch_npu.npu.amp.sharded_grad_scaler``: the FSDP gradient scaler on npu.

torch_npu ships ``_ShardedGradScaler`` here for FSDP (and CPU-offloaded
parameters). PyTorch's ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler``
already handles PrivateUse1 tensors, so this is that class with torch_npu's
default device, ``"npu"``. Unlike torch_npu, importing ``torch_npu`` does not
replace PyTorch's class with it (that would import FSDP, over a second, at
every ``import torch_npu``); ``ShardedGradScaler(device="npu")`` and this class
behave alike.
"""

from typing import Optional

import torch.distributed as dist
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler as _TorchShardedGradScaler

__all__ = []  # torch_npu exports nothing from here; the class is private by name


class _ShardedGradScaler(_TorchShardedGradScaler):
    r"""Gradient scaling aware of sharded (FSDP) and CPU-offloaded gradients.

    Found inf/NaN values are combined across the ranks of ``process_group``
    before the step is taken or skipped.

    Args:
        device: the device the scale lives on (``"npu"`` by default).
        init_scale: initial scale factor.
        backoff_factor: factor the scale shrinks by after a step with inf/NaN gradients.
        growth_factor: factor the scale grows by after ``growth_interval`` clean steps.
        growth_interval: steps without inf/NaN before the scale grows.
        enabled: if False, every method is a no-op.
        process_group: the group whose ranks share the found-inf result.
    """

    def __init__(
        self,
        device: str = "npu",
        init_scale: float = 2.0**16,
        backoff_factor: float = 0.5,
        growth_factor: float = 2.0,
        growth_interval: int = 2000,
        enabled: bool = True,
        process_group: Optional[dist.ProcessGroup] = dist.group.WORLD,
    ) -> None:
        super().__init__(
            device=device,
            init_scale=init_scale,
            backoff_factor=backoff_factor,
            growth_factor=growth_factor,
            growth_interval=growth_interval,
            enabled=enabled,
            process_group=process_group,
        )
