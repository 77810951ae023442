r"""``NpuFusedAdamW``: AdamW over combined buffers (torch_npu's class)."""

from typing import Any, Tuple

import torch

from .npu_fused_adam import _NpuFusedAdamBase

__all__ = ["NpuFusedAdamW"]


class NpuFusedAdamW(_NpuFusedAdamBase):
    r"""AdamW (`Decoupled Weight Decay Regularization`), fused: ``torch.optim.AdamW``'s update.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running
            averages of the gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): decoupled weight decay coefficient (default: 1e-2).
        amsgrad (bool, optional): use the AMSGrad variant (default: False).
    """

    _sparse_grad_message = "NpuFusedAdamW does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)

    def _decay(self, param: torch.Tensor, grad: torch.Tensor, group: dict) -> torch.Tensor:
        # Decoupled: the parameter shrinks, the gradient is left alone.
        param.mul_(1 - group["lr"] * group["weight_decay"])
        return grad
