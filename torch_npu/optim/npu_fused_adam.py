r"""``NpuFusedAdam``: Adam over combined buffers (torch_npu's class)."""

import math
from typing import Any, Sequence, Tuple

import torch

from .npu_fused_optim_base import NpuFusedOptimizerBase, _check_betas, _check_non_negative, _update_moments

__all__ = ["NpuFusedAdam"]


class _NpuFusedAdamBase(NpuFusedOptimizerBase):
    r"""Adam and AdamW: the same moments, a different weight decay."""

    def __init__(self, params: Any, lr: float, betas: Tuple[float, float], eps: float,
                 weight_decay: float, amsgrad: bool) -> None:
        _check_non_negative("learning rate", lr)
        _check_non_negative("epsilon value", eps)
        _check_betas(betas)
        _check_non_negative("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)

    def _init_param_state(self, p: torch.Tensor, amsgrad: bool) -> None:
        keys = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if amsgrad else [])
        self._fresh_state(p, keys)

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        self._init_param_state(p, group["amsgrad"])

    def _decay(self, param: torch.Tensor, grad: torch.Tensor, group: dict) -> torch.Tensor:
        r"""Apply the weight decay; returns the gradient to use."""
        raise NotImplementedError

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        for param, grad, state, _ in self._group_tensors(group_index):
            grad = self._decay(param, grad, group)
            state["step"] += 1
            bias_correction1 = 1 - beta1 ** state["step"]
            bias_correction2 = 1 - beta2 ** state["step"]
            _update_moments(state, grad, beta1, beta2)
            exp_avg_sq = state["exp_avg_sq"]
            if group["amsgrad"]:
                # The maximum of the second moments so far normalizes the step.
                second_moment = torch.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            else:
                second_moment = exp_avg_sq
            denom = (second_moment.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
            param.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / bias_correction1)


class NpuFusedAdam(_NpuFusedAdamBase):
    r"""Adam (`Adam: A Method for Stochastic Optimization`), fused: ``torch.optim.Adam``'s update.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running
            averages of the gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): L2 penalty added to the gradient (default: 0).
        amsgrad (bool, optional): use the AMSGrad variant (default: False).
    """

    _sparse_grad_message = "NpuFusedAdam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)

    def _decay(self, param: torch.Tensor, grad: torch.Tensor, group: dict) -> torch.Tensor:
        if group["weight_decay"] != 0:
            return grad.add(param, alpha=group["weight_decay"])
        return grad
