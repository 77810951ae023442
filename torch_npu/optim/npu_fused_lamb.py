r"""``NpuFusedLamb``: LAMB over combined buffers (torch_npu's class and formula)."""

from typing import Any, Optional, Sequence, Tuple

import torch

from ..utils.combine_tensors import get_storage_size
from .npu_fused_optim_base import _NpuFusedMomentsOptimizer, _check_betas, _check_non_negative, _update_moments

__all__ = ["NpuFusedLamb"]


def _segment_ids(params: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    r"""For each element of a combined buffer, the index of the parameter it belongs to.

    Built with device ops (no copy from the host, which would wait for the device).
    """
    return torch.cat([torch.full((get_storage_size(p),), i, dtype=torch.long, device=device)
                      for i, p in enumerate(params)])


def _segment_norms(values: torch.Tensor, segment_ids: torch.Tensor, count: int) -> torch.Tensor:
    return torch.zeros(count, dtype=values.dtype, device=values.device).index_add_(
        0, segment_ids, values.pow(2)).sqrt_()


class NpuFusedLamb(_NpuFusedMomentsOptimizer):
    r"""LAMB (`Large Batch Optimization for Deep Learning: Training BERT in 76 minutes`), fused.

    torch_npu's formula (PyTorch has no LAMB): with ``g`` the gradient
    (divided by the global gradient norm when ``use_global_grad_norm`` and
    that norm exceeds 1), ``m`` and ``v`` Adam's running averages without
    bias correction, ``u = m / (sqrt(v) + eps) + weight_decay * p`` and, per
    parameter, ``r = min(||p||, 10) / ||u||`` (1 if either norm is 0, always 1
    with ``adam=True``): ``p -= lr * r * u``. The trust ratios of all
    parameters are computed with a few ops on the combined buffers, without
    waiting for the device.

    Args:
        params (iterable): parameters or parameter groups (float32 / float16 npu tensors).
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-6).
        weight_decay (float, optional): weight decay (default: 0).
        adam (bool, optional): always use a trust ratio of 1, which makes this Adam without bias correction.
        use_global_grad_norm (bool, optional): divide the gradients by their global norm when it exceeds 1.
    """

    _sparse_grad_message = "NpuFusedLamb does not support sparse gradients, please consider SparseAdam instead."

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0, adam: bool = False,
                 use_global_grad_norm: bool = False) -> None:
        _check_non_negative("learning rate", lr)
        _check_betas(betas)
        _check_non_negative("epsilon value", eps)
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        #: The global gradient norm of the last step (``use_global_grad_norm``), a device tensor.
        self.global_grad_norm: Optional[torch.Tensor] = None
        # Per group, by the data pointer of its combined parameters of one
        # dtype: the parameter index of each combined element.
        self._segment_ids: Optional[dict] = None
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _reset_combination(self) -> None:
        super()._reset_combination()
        self._segment_ids = None

    def _prepare_group_steps(self) -> None:
        if self._segment_ids is None:
            self._segment_ids = {
                param.data_ptr(): _segment_ids(params, param.device)
                for group_index in range(len(self.param_groups))
                for param, _, _, params in self._group_tensors(group_index)
            }
        if self.use_global_grad_norm:
            grads = [g for g in self.get_combined_grads() if g is not None]
            if grads:
                self.global_grad_norm = torch.stack([g.float().pow(2).sum() for g in grads]).sum().sqrt()

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        for param, grad, state, params in self._group_tensors(group_index):
            if self.use_global_grad_norm and self.global_grad_norm is not None:
                # Dividing by max(norm, 1) is torch_npu's "divide if the norm exceeds 1" without a host read.
                grad = grad / self.global_grad_norm.clamp(min=1.0).to(grad.dtype)
            state["step"] += 1
            _update_moments(state, grad, beta1, beta2)
            adam_step = state["exp_avg"] / state["exp_avg_sq"].sqrt().add(group["eps"])
            if group["weight_decay"] != 0:
                adam_step.add_(param, alpha=group["weight_decay"])
            if self.adam:
                param.add_(adam_step, alpha=-group["lr"])
                continue
            ids, count = self._segment_ids[param.data_ptr()], len(params)
            weight_norm = _segment_norms(param, ids, count).clamp_(0, 10)
            adam_norm = _segment_norms(adam_step, ids, count)
            trust = torch.where((weight_norm == 0) | (adam_norm == 0),
                                torch.ones_like(weight_norm), weight_norm / adam_norm)
            param.addcmul_(adam_step, trust.index_select(0, ids), value=-group["lr"])
