"""``torch_npu.npu.amp.sharded_grad_scaler``: the FSDP gradient scaler on npu.

torch_npu ships ``_ShardedGradScaler`` here for FSDP (and CPU-offloaded
parameters). PyTorch's ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler``
already handles PrivateUse1 tensors, so this is that class with torch_npu's
default device, ``"npu"``. As in torch_npu, PyTorch's
``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler`` is this class
once torch_npu is imported; the replacement happens when a program imports
that module (``_fsdp_scaler_patch``), not at ``import torch_npu``.
"""

from typing import Any

import torch.distributed.fsdp.sharded_grad_scaler as _torch_sharded_grad_scaler

# PyTorch's own class, taken before the patch at the end of this module.
_TorchShardedGradScaler = _torch_sharded_grad_scaler.ShardedGradScaler

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

    def __init__(self, device: str = "npu", *args: Any, **kwargs: Any) -> None:
        # Only the default device differs from PyTorch's class (same argument
        # order as torch_npu's); the other arguments and their checks are its own.
        super().__init__(device, *args, **kwargs)


# torch_npu's patch (see _fsdp_scaler_patch): PyTorch's name is this class.
_torch_sharded_grad_scaler.ShardedGradScaler = _ShardedGradScaler
