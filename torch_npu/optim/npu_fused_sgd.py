r"""``NpuFusedSGD``: SGD with momentum over combined buffers (torch_npu's class)."""

import math
from typing import Any, Optional, Sequence

import torch
from torch.optim.optimizer import required

from ..utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import NpuFusedOptimizerBase, _check_non_negative

__all__ = ["NpuFusedSGD"]


class NpuFusedSGD(NpuFusedOptimizerBase):
    r"""Stochastic gradient descent, optionally with (Nesterov) momentum, fused.

    ``torch.optim.SGD``'s update: the first step's momentum buffer is the
    (decayed) gradient itself.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float): learning rate (required).
        momentum (float, optional): momentum factor (default: 0).
        dampening (float, optional): dampening of the momentum (default: 0).
        weight_decay (float, optional): L2 penalty (default: 0).
        nesterov (bool, optional): Nesterov momentum; needs a momentum and no dampening (default: False).
    """

    _sparse_grad_message = "NpuFusedSGD does not support sparse gradients"
    _has_step_state = False

    def __init__(self, params: Any, lr: float = required, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        if lr is not required:
            _check_non_negative("learning rate", lr)
        _check_non_negative("momentum value", momentum)
        _check_non_negative("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0.0 or not math.isclose(dampening, 0.0, abs_tol=1e-15)):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening" + pta_error(ErrCode.VALUE))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    def _init_param_state(self, p: torch.Tensor, weight_decay: float, momentum: float = 1.0,
                          dampening: float = 0.0) -> None:
        # Note [First momentum of a fused SGD]: torch.optim.SGD's first step
        # sets the buffer to the (decayed) gradient d. A combined buffer gets
        # one update for all its parameters, buf = momentum * buf + (1 -
        # dampening) * d, so a new buffer starts at d * dampening / momentum,
        # which that update turns into d (exactly 0, so exactly d, without
        # dampening). torch_npu instead skips the update on a global first
        # step, which leaves a parameter whose first gradient comes later
        # without momentum updates.
        state = self.state[p]
        buf = torch.zeros_like(p)
        if state.get("momentum_buffer") is not None:
            buf.copy_(state["momentum_buffer"])
        elif dampening != 0:
            d_p = p.grad.add(p, alpha=weight_decay) if weight_decay != 0 else p.grad
            buf.add_(d_p, alpha=dampening / momentum)
        state["momentum_buffer"] = buf

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return ["momentum_buffer"] if group["momentum"] != 0 else []

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        if group["momentum"] != 0:
            self._init_param_state(p, group["weight_decay"], group["momentum"], group["dampening"])

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        momentum = group["momentum"]
        for param, grad, state, _ in self._group_tensors(group_index):
            if group["weight_decay"] != 0:
                grad = grad.add(param, alpha=group["weight_decay"])
            if momentum != 0:
                buf: Optional[torch.Tensor] = state["momentum_buffer"]
                # See Note [First momentum of a fused SGD].
                buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
                grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
            param.add_(grad, alpha=-group["lr"])
