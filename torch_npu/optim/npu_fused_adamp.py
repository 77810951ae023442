r"""``NpuFusedAdamP``: AdamP over combined buffers (torch_npu's class and formula)."""

import math
from typing import Any, Callable, Sequence, Tuple

import torch

from ..utils.combine_tensors import get_storage_size
from .npu_fused_optim_base import _NpuFusedMomentsOptimizer, _check_betas, _check_non_negative, _update_moments

__all__ = ["NpuFusedAdamP"]


def _channel_view(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.size(0), -1)


def _layer_view(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(1, -1)


def _projection(p: torch.Tensor, grad: torch.Tensor, perturb: torch.Tensor, delta: float, eps: float,
                view: Callable[[torch.Tensor], torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    r"""(whether ``p`` is scale-invariant under ``view``, ``perturb`` with its radial part removed)."""
    p_rows, g_rows = view(p), view(grad)
    cosine = (g_rows * p_rows).sum(dim=1).abs() / g_rows.norm(dim=1).add(eps) / p_rows.norm(dim=1).add(eps)
    invariant = cosine.max() < delta / math.sqrt(p_rows.size(1))
    expand = [-1] + [1] * (p.dim() - 1)
    p_n = p / p_rows.norm(dim=1).view(expand).add(eps)
    projected = perturb - p_n * view(p_n * perturb).sum(dim=1).view(expand)
    return invariant, projected


class NpuFusedAdamP(_NpuFusedMomentsOptimizer):
    r"""AdamP (`AdamP: Slowing Down the Slowdown for Momentum Optimizers on Scale-invariant Weights`), fused.

    torch_npu's formula (PyTorch has no AdamP): Adam's bias-corrected step
    ``s = m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`` (Nesterov:
    ``(beta1 * m + (1 - beta1) * g)`` in place of ``m``); for a parameter of
    two or more dimensions whose gradient is nearly orthogonal to it (the
    largest cosine similarity, per output channel and then over the whole
    layer, below ``delta / sqrt(fan-in)``), ``s`` loses its component along
    the parameter and the weight decay is scaled by ``wd_ratio``. Then
    ``p *= 1 - lr * weight_decay * ratio`` and ``p -= lr / (1 - beta1^t) * s``.
    The choices are made on the device (no host reads).

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages (default: (0.9, 0.999)).
        eps (float, optional): added to the denominators (default: 1e-8).
        weight_decay (float, optional): decoupled weight decay (default: 0).
        delta (float, optional): threshold of the cosine similarity (default: 0.1).
        wd_ratio (float, optional): weight decay ratio of scale-invariant parameters (default: 0.1).
        nesterov (bool, optional): Nesterov momentum (default: False).
    """

    _sparse_grad_message = "NpuFusedAdamP does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, delta: float = 0.1, wd_ratio: float = 0.1,
                 nesterov: bool = False) -> None:
        # torch_npu checks nothing here; these checks are ours (bad values gave silent nonsense).
        _check_non_negative("learning rate", lr)
        _check_non_negative("epsilon value", eps)
        _check_betas(betas)
        _check_non_negative("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, delta=delta,
                        wd_ratio=wd_ratio, nesterov=nesterov)
        super().__init__(params, defaults)

    def _project(self, params: Sequence[torch.Tensor], perturb: torch.Tensor, group: dict) -> torch.Tensor:
        r"""Projects each parameter's slice of ``perturb`` in place; returns the weight decay ratios."""
        ratios = torch.ones_like(perturb)
        offset = 0
        for p in params:
            if p.dim() > 1:
                view = perturb.as_strided(p.size(), p.stride(), offset + p.storage_offset())
                by_channel, channel_projected = _projection(p, p.grad, view, group["delta"], group["eps"], _channel_view)
                by_layer, layer_projected = _projection(p, p.grad, view, group["delta"], group["eps"], _layer_view)
                view.copy_(torch.where(by_channel, channel_projected, torch.where(by_layer, layer_projected, view)))
                ratio = torch.where(by_channel | by_layer, group["wd_ratio"], 1.0).to(perturb.dtype)
                ratios.narrow(0, offset, get_storage_size(p)).copy_(ratio.expand(get_storage_size(p)))
            offset += get_storage_size(p)
        return ratios

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        for param, grad, state, params in self._group_tensors(group_index):
            state["step"] += 1
            bias_correction1 = 1 - beta1 ** state["step"]
            bias_correction2 = 1 - beta2 ** state["step"]
            _update_moments(state, grad, beta1, beta2)
            exp_avg = state["exp_avg"]
            denom = (state["exp_avg_sq"].sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
            moment = exp_avg.mul(beta1).add_(grad, alpha=1 - beta1) if group["nesterov"] else exp_avg
            perturb = moment / denom
            ratios = self._project(params, perturb, group)
            if group["weight_decay"] > 0:
                param.mul_(1 - group["lr"] * group["weight_decay"] * ratios)
            param.add_(perturb, alpha=-group["lr"] / bias_correction1)
