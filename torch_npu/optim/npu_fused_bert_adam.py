r"""``NpuFusedBertAdam``: BERT's Adam over combined buffers (torch_npu's class and formula)."""

import math
from typing import Any, Callable, Dict

from torch.optim.optimizer import required

from ..utils._error_code import ErrCode, pta_error
from .npu_fused_optim_base import _NpuFusedMomentsOptimizer, _check_non_negative, _update_moments

__all__ = ["NpuFusedBertAdam"]


def _warmup_cosine(x: float, warmup: float = 0.002) -> float:
    return x / warmup if x < warmup else 0.5 * (1.0 + math.cos(math.pi * x))


def _warmup_constant(x: float, warmup: float = 0.002) -> float:
    return x / warmup if x < warmup else 1.0


def _warmup_linear(x: float, warmup: float = 0.002) -> float:
    return x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)


def _warmup_poly(x: float, warmup: float = 0.002, degree: float = 0.5) -> float:
    return x / warmup if x < warmup else (1.0 - x) ** degree


#: The learning-rate schedules, by name: a factor of the progress ``step / t_total``.
SCHEDULES: Dict[str, Callable[..., float]] = {
    "warmup_cosine": _warmup_cosine,
    "warmup_constant": _warmup_constant,
    "warmup_linear": _warmup_linear,
    "warmup_poly": _warmup_poly,
}


class NpuFusedBertAdam(_NpuFusedMomentsOptimizer):
    r"""BERT's Adam with decoupled weight decay fix, fused (torch_npu's formula; PyTorch has none).

    Per step and dtype buffer: the gradients are clipped to ``max_grad_norm``
    (if positive; the buffer's own norm, scaled on the device); Adam's running
    averages without bias correction give ``u = m / (sqrt(v) + e)``, plus
    ``weight_decay * p``; ``p -= lr * schedule(step / t_total, warmup) * u``,
    where ``step`` counts from 0 and a ``t_total`` of -1 means no schedule.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float): learning rate (required).
        warmup (float, optional): fraction of ``t_total`` for the warmup; -1: none (default: -1).
        t_total (int, optional): total number of steps of the schedule; -1: constant rate (default: -1).
        schedule (str, optional): one of ``SCHEDULES`` (default: ``'warmup_linear'``).
        b1, b2 (float, optional): Adam's coefficients (default: 0.9, 0.999).
        e (float, optional): Adam's epsilon (default: 1e-6).
        weight_decay (float, optional): weight decay (default: 0.01).
        max_grad_norm (float, optional): gradient clipping norm; -1: none (default: 1.0).
    """

    _sparse_grad_message = "NpuFusedBertAdam does not support sparse gradients"

    def __init__(self, params: Any, lr: float = required, warmup: float = -1, t_total: int = -1,
                 schedule: str = "warmup_linear", b1: float = 0.9, b2: float = 0.999, e: float = 1e-6,
                 weight_decay: float = 0.01, max_grad_norm: float = 1.0) -> None:
        if lr is not required:
            _check_non_negative("learning rate", lr)
        if (warmup < 0.0 and warmup != -1) or warmup >= 1.0:
            raise ValueError("Invalid warmup: {}".format(warmup) + pta_error(ErrCode.VALUE))
        if schedule not in SCHEDULES:
            raise ValueError("Invalid schedule parameter: {}".format(schedule) + pta_error(ErrCode.VALUE))
        for name, beta in (("b1", b1), ("b2", b2)):
            if beta < 0.0 or beta >= 1.0:
                raise ValueError("Invalid {} parameter: {}".format(name, beta) + pta_error(ErrCode.VALUE))
        _check_non_negative("epsilon value", e)
        defaults = dict(lr=lr, schedule=schedule, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
                        weight_decay=weight_decay, max_grad_norm=max_grad_norm)
        self.max_grad_norm = max_grad_norm
        super().__init__(params, defaults)

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        beta1, beta2 = group["b1"], group["b2"]
        for param, grad, state, _ in self._group_tensors(group_index):
            if self.max_grad_norm > 0:
                norm = grad.float().pow(2).sum().sqrt()
                grad.mul_((self.max_grad_norm / (norm + 1e-6)).clamp(max=1.0))
            _update_moments(state, grad, beta1, beta2)
            update = state["exp_avg"] / (state["exp_avg_sq"].sqrt() + group["e"])
            if group["weight_decay"] > 0.0:
                update.add_(param, alpha=group["weight_decay"])
            lr = group["lr"]
            if group["t_total"] != -1:
                lr = lr * SCHEDULES[group["schedule"]](state["step"] / group["t_total"], group["warmup"])
            param.add_(update, alpha=-lr)
            state["step"] += 1
