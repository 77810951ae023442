r"""``NpuFusedRMSprop``: RMSprop over combined buffers (torch_npu's class)."""

from typing import Any, Sequence

import torch

from .npu_fused_optim_base import NpuFusedOptimizerBase, _check_non_negative

__all__ = ["NpuFusedRMSprop"]


class _NpuFusedRMSpropBase(NpuFusedOptimizerBase):
    r"""What PyTorch's and TensorFlow's RMSprop share: the states and the checks."""

    #: State keys that start at one instead of zero.
    _ones: Sequence[str] = ()

    def __init__(self, params: Any, defaults: dict) -> None:
        _check_non_negative("learning rate", defaults["lr"])
        _check_non_negative("epsilon value", defaults["eps"])
        _check_non_negative("momentum value", defaults["momentum"])
        _check_non_negative("weight_decay value", defaults["weight_decay"])
        _check_non_negative("alpha value", defaults["alpha"])
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)

    @staticmethod
    def _state_keys(momentum: float, centered: bool) -> Sequence[str]:
        return ["square_avg"] + (["momentum_buffer"] if momentum > 0 else []) + (["grad_avg"] if centered else [])

    def _init_param_state(self, p: torch.Tensor, momentum: float, centered: bool) -> None:
        self._fresh_state(p, self._state_keys(momentum, centered), ones=self._ones)

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return self._state_keys(group["momentum"], group["centered"])

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        self._init_param_state(p, group["momentum"], group["centered"])


class NpuFusedRMSprop(_NpuFusedRMSpropBase):
    r"""RMSprop, fused: ``torch.optim.RMSprop``'s update.

    The square root of the running average is taken before ``eps`` is added
    (TensorFlow's order is the other way round: ``NpuFusedRMSpropTF``).

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-2).
        alpha (float, optional): smoothing constant (default: 0.99).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): L2 penalty (default: 0).
        momentum (float, optional): momentum factor (default: 0).
        centered (bool, optional): normalize by an estimate of the gradient's variance (default: False).
    """

    _sparse_grad_message = "NpuFusedRMSprop does not support sparse gradients."

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay))

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        alpha = group["alpha"]
        for param, grad, state, _ in self._group_tensors(group_index):
            state["step"] += 1
            if group["weight_decay"] != 0:
                grad = grad.add(param, alpha=group["weight_decay"])
            square_avg = state["square_avg"]
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.mul_(alpha).add_(grad, alpha=1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
            else:
                avg = square_avg.sqrt().add_(group["eps"])
            if group["momentum"] > 0:
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).addcdiv_(grad, avg)
                param.add_(buf, alpha=-group["lr"])
            else:
                param.addcdiv_(grad, avg, value=-group["lr"])
