r"""``NpuFusedAdadelta``: Adadelta over combined buffers (torch_npu's class)."""

from typing import Any, Sequence

import torch

from ..utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import NpuFusedOptimizerBase, _check_non_negative

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    r"""Adadelta (`ADADELTA: An Adaptive Learning Rate Method`), fused: ``torch.optim.Adadelta``'s update.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): scale of the delta applied to the parameters (default: 1.0).
        rho (float, optional): coefficient of the running averages (default: 0.9).
        eps (float, optional): added inside the square roots (default: 1e-6).
        weight_decay (float, optional): L2 penalty (default: 0).
    """

    _sparse_grad_message = "NpuFusedAdadelta does not support sparse gradients"

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0) -> None:
        _check_non_negative("learning rate", lr)
        if rho < 0.0 or rho > 1.0:
            raise ValueError("Invalid rho value: {}".format(rho) + pta_error(ErrCode.VALUE))
        _check_non_negative("epsilon value", eps)
        _check_non_negative("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def _init_param_state(self, p: torch.Tensor) -> None:
        self._fresh_state(p, ["square_avg", "acc_delta"])

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return ["square_avg", "acc_delta"]

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        self._init_param_state(p)

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        rho, eps = group["rho"], group["eps"]
        for param, grad, state, _ in self._group_tensors(group_index):
            state["step"] += 1
            if group["weight_decay"] != 0:
                grad = grad.add(param, alpha=group["weight_decay"])
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
            param.add_(delta, alpha=-group["lr"])
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
