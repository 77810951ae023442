r"""``NpuFusedLamb``: LAMB over combined buffers (torch_npu's class and formula)."""

from typing import Any, Optional, Sequence, Tuple

import torch

from ..utils.combine_tensors import get_storage_size
from .npu_fused_optim_base import NpuFusedOptimizerBase, _check_betas, _check_non_negative

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


class NpuFusedLamb(NpuFusedOptimizerBase):
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
        # Per group and dtype: the parameter index of each combined element.
        self._segment_ids_by_group: Optional[list] = None
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _init_param_state(self, p: torch.Tensor) -> None:
        self._fresh_state(p, ["exp_avg", "exp_avg_sq"])

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return ["exp_avg", "exp_avg_sq"]

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        self._init_param_state(p)

    def _reset_combination(self) -> None:
        super()._reset_combination()
        self._segment_ids_by_group = None

    def _prepare_group_steps(self) -> None:
        if self._segment_ids_by_group is None:
            self._segment_ids_by_group = [
                [_segment_ids(params, params[0].device) if params else None for params in lists]
                for lists in self.params_lists_indexed_by_group
            ]
        if self.use_global_grad_norm:
            grads = [g for g in self.get_combined_grads() if g is not None]
            if grads:
                self.global_grad_norm = torch.stack([g.float().pow(2).sum() for g in grads]).sum().sqrt()

    def _group_step(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        beta1, beta2 = group["betas"]
        segment_ids = self._segment_ids_by_group[group_index]
        lists = self.params_lists_indexed_by_group[group_index]
        for dtype_index, (param, grad, state) in enumerate(
                zip(self.combined_params_indexed_by_group[group_index],
                    self.combined_grads_indexed_by_group[group_index],
                    self.combined_param_states_indexed_by_group[group_index])):
            if param is None or grad is None:
                continue
            if self.use_global_grad_norm and self.global_grad_norm is not None:
                # Dividing by max(norm, 1) is torch_npu's "divide if the norm exceeds 1" without a host read.
                grad = grad / self.global_grad_norm.clamp(min=1.0).to(grad.dtype)
            state["step"] += 1
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            adam_step = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
            if group["weight_decay"] != 0:
                adam_step.add_(param, alpha=group["weight_decay"])
            if self.adam:
                param.add_(adam_step, alpha=-group["lr"])
                continue
            ids, count = segment_ids[dtype_index], len(lists[dtype_index])
            weight_norm = _segment_norms(param, ids, count).clamp_(0, 10)
            adam_norm = _segment_norms(adam_step, ids, count)
            trust = torch.where((weight_norm == 0) | (adam_norm == 0),
                                torch.ones_like(weight_norm), weight_norm / adam_norm)
            param.addcmul_(adam_step, trust.index_select(0, ids), value=-group["lr"])
