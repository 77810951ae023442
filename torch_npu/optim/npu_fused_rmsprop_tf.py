r"""``NpuFusedRMSpropTF``: TensorFlow's RMSprop over combined buffers (torch_npu's class)."""

from typing import Any

from .npu_fused_rmsprop import _NpuFusedRMSpropBase

__all__ = ["NpuFusedRMSpropTF"]


class NpuFusedRMSpropTF(_NpuFusedRMSpropBase):
    r"""RMSprop in TensorFlow's formulation, fused (torch_npu's formula; PyTorch has no equivalent).

    Differences from ``torch.optim.RMSprop``: the running average of the
    squared gradient starts at one; it is updated as
    ``v += (1 - alpha) * (g * g - v)``; ``eps`` is added *inside* the square
    root; with ``lr_in_momentum`` the learning rate is accumulated in the
    momentum buffer (``buf = momentum * buf + lr * g / sqrt(v + eps)``,
    ``p -= buf``); with ``decoupled_decay`` the weight decay shrinks the
    parameter (``p -= weight_decay * p``) instead of adding to the gradient.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-2).
        alpha (float, optional): smoothing constant (default: 0.9).
        eps (float, optional): added inside the square root (default: 1e-10).
        weight_decay (float, optional): weight decay (default: 0).
        momentum (float, optional): momentum factor (default: 0).
        centered (bool, optional): normalize by an estimate of the gradient's variance (default: False).
        decoupled_decay (bool, optional): apply the weight decay to the parameter only (default: False).
        lr_in_momentum (bool, optional): scale the momentum buffer by the learning rate (default: True).
    """

    _sparse_grad_message = "NpuFusedRMSpropTF does not support sparse gradients."
    _ones = ("square_avg",)

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.9, eps: float = 1e-10,
                 weight_decay: float = 0, momentum: float = 0.0, centered: bool = False,
                 decoupled_decay: bool = False, lr_in_momentum: bool = True) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, decoupled_decay=decoupled_decay,
                                      lr_in_momentum=lr_in_momentum))

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        one_minus_alpha = 1.0 - group["alpha"]
        lr, eps = group["lr"], group["eps"]
        for param, grad, state, _ in self._group_tensors(group_index):
            state["step"] += 1
            if group["weight_decay"] != 0:
                if group.get("decoupled_decay", False):
                    param.add_(param, alpha=-group["weight_decay"])
                else:
                    grad = grad.add(param, alpha=group["weight_decay"])
            square_avg = state["square_avg"]
            square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(eps).sqrt_()
            else:
                avg = square_avg.add(eps).sqrt_()
            if group["momentum"] > 0:
                buf = state["momentum_buffer"]
                if group.get("lr_in_momentum", False):
                    buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=lr)
                    param.sub_(buf)
                else:
                    buf.mul_(group["momentum"]).addcdiv_(grad, avg)
                    param.add_(buf, alpha=-lr)
            else:
                param.addcdiv_(grad, avg, value=-lr)
