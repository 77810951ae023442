r"""``NpuFusedOptimizerBase``: what torch_npu's fused optimizers share.

A fused optimizer moves the storages of its parameters, of their gradients
and of its per-parameter states into a few contiguous buffers, one per dtype
(float32, float16) for each kind of tensor (``torch_npu.utils.npu_combine_tensors``),
and updates every parameter of a group with a handful of ops on slices of
those buffers. The parameters keep their identity: the model sees the
updates. The combination is made at the first ``step`` (or ``zero_grad`` or
``clip_grad_norm_fused_``) from the parameters that have a gradient then.

Note [Fused optimizers follow their tensors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch_npu combines once and then trusts the buffers. A program that gives a
parameter a new gradient tensor (``model.zero_grad()``, which sets them to
``None`` in PyTorch 2, or a parameter that gets its first gradient late),
drops a gradient, or replaces a parameter's storage (``p.data = ...``) would
then be stepped with stale buffers, silently. Here every ``step`` checks, in
the loop over the parameters that it makes anyway, that each parameter with a
gradient is still the one combined and that its gradient's storage is still
the one in the buffer; new gradients are combined again (cheap: fresh
tensors of the current stream), and a changed set of parameters is combined
again from scratch, states included. ``load_state_dict`` combines the loaded
states at the next step (torch_npu keeps stepping the old buffers).
"""

from collections import defaultdict
from typing import Any, Callable, Optional, Sequence

import torch
from torch import inf
from torch.optim.optimizer import Optimizer

from ..utils._error_code import ErrCode, pta_error
from ..utils.combine_tensors import get_part_combined_tensor, get_storage_size, npu_combine_tensors

__all__ = ["NpuFusedOptimizerBase"]

# Index of a dtype in the per-dtype lists, as torch_npu orders them.
_DTYPE_INDEX = {torch.float32: 0, torch.float16: 1}


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class NpuFusedOptimizerBase(Optimizer):
    r"""Base class of torch_npu's fused optimizers.

    Subclasses implement ``_group_step(group_index)`` over the combined
    tensors of a group, and describe their per-parameter state with
    ``_combined_state_keys(group)`` and ``_init_group_param_state(p, group)``.
    Parameters must be float32 or float16 npu tensors.

    Args:
        params: parameters or parameter groups, as for ``torch.optim.Optimizer``.
        default: the default hyper-parameters.
    """

    #: The error for a sparse gradient (each optimizer names itself).
    _sparse_grad_message = "Fused optimizers do not support sparse gradients"
    #: Whether per-parameter states count steps (``state['step']``).
    _has_step_state = True

    def __init__(self, params: Any, default: dict) -> None:
        super().__init__(params, default)
        self.combined_params_indexed_by_group: Optional[list] = None
        self.combined_grads_indexed_by_group: Optional[list] = None
        self.combined_param_states_indexed_by_group: Optional[list] = None
        self.params_lists_indexed_by_group: list = []
        self.params_all_group: list = [[], []]
        self.params_all_group_combined: list = 2 * [None]
        self.grads_all_group_combined: list = 2 * [None]
        self.is_params_grads_combined = False
        self.is_states_combined = False
        self.is_grads_masks_combined = False
        self.is_fused_optimizer = True
        # Parameter -> (its storage's pointer, its gradient's) at combination.
        self._combined_storages: dict = {}

    # -- combining parameters and gradients --------------------------------

    def _maybe_init_combined_params_and_grads(self) -> None:
        if self.is_params_grads_combined:
            return
        per_group = []
        all_group: list = [[], []]
        for group in self.param_groups:
            lists: list = [[], []]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError(self._sparse_grad_message + pta_error(ErrCode.NOT_SUPPORT))
                if p.dtype not in _DTYPE_INDEX:
                    raise TypeError(
                        "Fused optimizer's parameters must be either float32 or float16, but received {}".format(p.dtype)
                        + pta_error(ErrCode.TYPE)
                    )
                lists[_DTYPE_INDEX[p.dtype]].append(p)
            per_group.append(lists)
            for i in range(2):
                all_group[i] += lists[i]
        _check_own_storages([p for params in all_group for p in params])
        self.params_lists_indexed_by_group = per_group
        self.params_all_group = all_group
        self.params_all_group_combined = [npu_combine_tensors(params) for params in all_group]
        self.combined_params_indexed_by_group = self._split_by_group(self.params_all_group_combined, lambda p: p)
        self._combine_grads()
        self.is_params_grads_combined = any(c is not None for c in self.params_all_group_combined)

    def _combine_grads(self) -> None:
        self.grads_all_group_combined = [npu_combine_tensors([p.grad for p in params]) for params in self.params_all_group]
        self.combined_grads_indexed_by_group = self._split_by_group(self.grads_all_group_combined, lambda p: p.grad)
        self._combined_storages = {
            p: (_storage_ptr(p), _storage_ptr(p.grad)) for params in self.params_all_group for p in params
        }

    def _split_by_group(self, combined: Sequence[Optional[torch.Tensor]], tensor_of: Callable) -> list:
        # One slice per group and dtype, in the order the buffers were made.
        offsets = [0, 0]
        parts = []
        for lists in self.params_lists_indexed_by_group:
            group_parts = []
            for i, params in enumerate(lists):
                size = sum(get_storage_size(tensor_of(p)) for p in params)
                group_parts.append(get_part_combined_tensor(combined[i], offsets[i], size))
                offsets[i] += size
            parts.append(group_parts)
        return parts

    def _combination_changes(self) -> Optional[str]:
        r"""``None``, ``"grads"`` or ``"all"``: see Note [Fused optimizers follow their tensors]."""
        grads_changed = False
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                combined = self._combined_storages.get(p)
                if grad is None:
                    if combined is not None:
                        return "all"
                    continue
                if combined is None or _storage_ptr(p) != combined[0]:
                    return "all"
                if _storage_ptr(grad) != combined[1]:
                    grads_changed = True
        return "grads" if grads_changed else None

    def _reset_combination(self) -> None:
        r"""Forget every combination; the next step combines afresh (states included)."""
        self.is_params_grads_combined = False
        self.is_states_combined = False
        self.is_grads_masks_combined = False
        self._combined_storages = {}

    def _follow_tensors(self) -> None:
        # See Note [Fused optimizers follow their tensors].
        if not self.is_params_grads_combined:
            self._maybe_init_combined_params_and_grads()
            return
        change = self._combination_changes()
        if change == "grads":
            self._combine_grads()
        elif change == "all":
            self._reset_combination()
            self._maybe_init_combined_params_and_grads()

    # -- per-parameter states ----------------------------------------------

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        r"""The per-parameter state tensors of ``group`` that are combined."""
        raise NotImplementedError("subclasses of NpuFusedOptimizerBase define their states" + pta_error(ErrCode.NOT_SUPPORT))

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        r"""Make ``self.state[p]`` hold fresh tensors of its own (see ``_fresh_state``)."""
        raise NotImplementedError("subclasses of NpuFusedOptimizerBase define their states" + pta_error(ErrCode.NOT_SUPPORT))

    def _fresh_state(self, p: torch.Tensor, keys: Sequence[str], ones: Sequence[str] = ()) -> None:
        r"""Give ``p`` its state tensors, each a new tensor that can be combined.

        A new state starts at step 0 with zeros (ones for the keys in
        ``ones``). An existing state (loaded, or combined before) is copied
        into new tensors of ``p``'s dtype and device, so that combining them
        moves no storage that something else shares.
        """
        state = self.state[p]
        fresh = len(state) == 0
        if fresh and self._has_step_state:
            state["step"] = 0
        for key in keys:
            value = torch.ones_like(p) if key in ones and (fresh or key not in state) else torch.zeros_like(p)
            if not fresh and key in state:
                value.copy_(state[key])
            state[key] = value

    def _combine_group_param_states(self, group_index: int) -> None:
        group = self.param_groups[group_index]
        keys = self._combined_state_keys(group)
        combined_states = []
        for params in self.params_lists_indexed_by_group[group_index]:
            steps = []
            tensors: dict = {key: [] for key in keys}
            for p in params:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError(self._sparse_grad_message + pta_error(ErrCode.NOT_SUPPORT))
                self._init_group_param_state(p, group)
                state = self.state[p]
                steps.append(state.get("step", 0))
                for key in keys:
                    tensors[key].append(state[key])
            combined: defaultdict = defaultdict(dict)
            combined["step"] = steps[0] if steps else 0
            for key in keys:
                combined[key] = npu_combine_tensors(tensors[key])
            combined_states.append(combined)
        self.combined_param_states_indexed_by_group[group_index] = combined_states

    def _maybe_init_combined_states(self) -> None:
        if self.is_states_combined:
            return
        self.combined_param_states_indexed_by_group = len(self.param_groups) * [None]
        for i in range(len(self.param_groups)):
            self._combine_group_param_states(i)
        if not all(value is None for value in self.combined_param_states_indexed_by_group):
            self.is_states_combined = True

    def load_state_dict(self, state_dict: dict) -> None:
        r"""As ``torch.optim.Optimizer.load_state_dict``; the loaded states are combined at the next step."""
        super().load_state_dict(state_dict)
        self.is_states_combined = False

    # -- stepping -------------------------------------------------------------

    def _count_steps(self) -> None:
        if not self._has_step_state:
            return
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["step"] += 1

    def _prepare_group_steps(self) -> None:
        r"""Work before the groups' steps (optimizers with extra buffers override this)."""

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        r"""Perform one optimization step over the combined buffers.

        Args:
            closure (Callable, optional): re-evaluates the model and returns the loss.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._follow_tensors()
        self._maybe_init_combined_states()
        self._prepare_group_steps()
        self._count_steps()
        for i in range(len(self.param_groups)):
            self._group_step(i)
        return loss

    def _group_step(self, group_index: int) -> None:
        raise NotImplementedError(pta_error(ErrCode.NOT_SUPPORT))

    def _group_tensors(self, group_index: int) -> list:
        r"""``(param, grad, state, params)`` per dtype of the group, for the dtypes it has.

        ``param``, ``grad`` and the tensors of ``state`` are the group's
        slices of the combined buffers of one dtype; ``params`` are the
        parameters laid out in them, in order.
        """
        return [
            (param, grad, state, params)
            for param, grad, state, params in zip(
                self.combined_params_indexed_by_group[group_index],
                self.combined_grads_indexed_by_group[group_index],
                self.combined_param_states_indexed_by_group[group_index],
                self.params_lists_indexed_by_group[group_index],
            )
            if param is not None and grad is not None
        ]

    @torch.no_grad()
    def zero_grad(self, set_to_none: bool = False) -> None:
        r"""Zero the gradients, with one op per combined buffer.

        Args:
            set_to_none (bool): must be ``False``: the gradients' storages are
                slices of the combined buffer (torch_npu raises ``ValueError``).
        """
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers" + pta_error(ErrCode.VALUE))
        if not self.is_params_grads_combined:
            self._maybe_init_combined_params_and_grads()
        if self.is_params_grads_combined and self._combination_changes() is None:
            for grads in self.grads_all_group_combined:
                if grads is not None:
                    grads.zero_()
        else:
            super().zero_grad(set_to_none=False)

    def get_combined_params(self) -> list:
        r"""The combined parameters: ``[float32 buffer, float16 buffer]`` (``None`` where there is none)."""
        return self.params_all_group_combined

    def get_combined_grads(self) -> list:
        r"""The combined gradients, as ``get_combined_params``."""
        return self.grads_all_group_combined

    # -- gradient clipping ----------------------------------------------------

    @torch.no_grad()
    def clip_grad_norm_fused_(self, max_norm: float, norm_type: float = 2) -> torch.Tensor:
        r"""``torch.nn.utils.clip_grad_norm_`` over the combined gradients.

        Scales every gradient by ``max_norm / (total_norm + 1e-6)`` if that is
        below 1, without waiting for the device.

        Returns:
            The total norm of the gradients (float32), or ``torch.tensor(0.)`` if there are none.
        """
        self._follow_tensors()
        return _clip_grad_norm_fused_(self.get_combined_grads(), max_norm, norm_type)


class _NpuFusedMomentsOptimizer(NpuFusedOptimizerBase):
    r"""Optimizers whose only states are Adam's running averages ``exp_avg`` and ``exp_avg_sq``."""

    def _init_param_state(self, p: torch.Tensor) -> None:
        self._fresh_state(p, ["exp_avg", "exp_avg_sq"])

    def _combined_state_keys(self, group: dict) -> Sequence[str]:
        return ["exp_avg", "exp_avg_sq"]

    def _init_group_param_state(self, p: torch.Tensor, group: dict) -> None:
        self._init_param_state(p)


def _update_moments(state: dict, grad: torch.Tensor, beta1: float, beta2: float) -> None:
    r"""Adam's running averages of the gradient and its square, in ``state``, in place."""
    state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
    state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)


def _clip_grad_norm_fused_(combined_grads: Sequence[Optional[torch.Tensor]], max_norm: float, norm_type: float) -> torch.Tensor:
    grads = [g for g in combined_grads if g is not None]
    if len(grads) == 0:
        return torch.tensor(0.0)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    # Every npu format is ND here: the buffers hold no padding, so torch_npu's
    # masks (all ones) are not needed.
    if norm_type == inf:
        total_norm = torch.stack([g.float().abs().max() for g in grads]).max()
    else:
        total_norm = torch.stack([g.float().abs().pow(norm_type).sum() for g in grads]).sum().pow(1 / norm_type)
    # min(coef, 1) scales exactly as torch_npu's "if clip_coef < 1", without reading the norm on the host.
    clip_coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(clip_coef)
    return total_norm


def _check_own_storages(params: Sequence[torch.Tensor]) -> None:
    r"""Refuse parameters (or gradients) that share a storage: a storage moves into one buffer only."""
    for what, tensors in (("parameters", params), ("gradients", [p.grad for p in params])):
        seen: dict = {}
        for i, t in enumerate(tensors):
            ptr = _storage_ptr(t)
            if ptr != 0 and seen.setdefault(ptr, i) != i:
                raise RuntimeError(
                    f"Fused optimizers need {what} with storages of their own, but {what} {seen[ptr]} and {i} "
                    "share one (views of one tensor?); give each its own tensor or use torch.optim"
                    + pta_error(ErrCode.PARAM)
                )


def _check_non_negative(what: str, value: Any) -> None:
    r"""torch_npu's ``ValueError("Invalid <what>: <value>")`` for a negative hyper-parameter."""
    if value < 0.0:
        raise ValueError("Invalid {}: {}".format(what, value) + pta_error(ErrCode.VALUE))


def _check_betas(betas: Sequence[float]) -> None:
    r"""torch_npu's check of Adam's ``betas``: two coefficients, each in [0, 1)."""
    if len(betas) != 2:
        raise ValueError("Invalid betas: expected two coefficients, got {}".format(betas) + pta_error(ErrCode.VALUE))
    for index, beta in enumerate(betas):
        if beta < 0.0 or beta >= 1.0:
            raise ValueError("Invalid beta parameter at index {}: {}".format(index, beta) + pta_error(ErrCode.VALUE))
