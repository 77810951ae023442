r"""``_DistributedMuon``: torch_npu's Muon with Newton-Schulz over DTensor shards.

Muon orthogonalizes each 2-D parameter's momentum with a Newton-Schulz
iteration. For a plain tensor (or with no process group) this is
``torch.optim.Muon``'s update, computed by PyTorch's own functions. For a
DTensor parameter sharded over ``process_group``, as torch_npu:

- sharded on dim 1 (each rank holds ``[m, n / N]`` of ``[m, n]``): the Gram
  matrix ``X X^T`` of the whole matrix is the sum of the shards' own, so each
  rank iterates on its shard and all-reduces the ``[m, m]`` Gram matrix (and
  the squared norm) at each step: no rank holds the whole matrix;
- sharded on dim 0 (or another dim): parameter ``i`` is orthogonalized by rank
  ``i % N`` after an all-gather of its update, and broadcast (in bfloat16, the
  iteration's dtype) to the other ranks, which keep their shard.

Nothing here needs hardware: the collectives are the process group's.
Importing this module imports ``torch.distributed.tensor`` (slow), so
``torch_npu.optim`` imports it on first use only.
"""

from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.tensor import DTensor, Shard
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz
from torch.optim.optimizer import Optimizer

__all__: List[str] = []

DEFAULT_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def _shard_dim(param: Tensor) -> Optional[int]:
    r"""The dimension a DTensor is sharded on, or ``None`` (not a DTensor, or replicated)."""
    if not isinstance(param, DTensor):
        return None
    for placement in param.placements:
        if isinstance(placement, Shard):
            return placement.dim
    return None


# torch_npu's helper names, which its tests import.
def _is_dtensor_shard(param: Tensor) -> bool:
    r"""Whether ``param`` is a DTensor sharded on some dimension."""
    return _shard_dim(param) is not None


def _is_dtensor_shard1(param: Tensor) -> bool:
    r"""Whether ``param`` is a DTensor sharded on dimension 1."""
    return _shard_dim(param) == 1


def _get_shard_dim(param: Tensor) -> int:
    r"""The dimension ``param`` is sharded on; 0 if it is not sharded."""
    dim = _shard_dim(param)
    return 0 if dim is None else dim


def _newtonschulz_orthogonalize(grad: Tensor, ns_coefficients: Tuple[float, float, float] = DEFAULT_NS_COEFFICIENTS,
                                ns_steps: int = 5, eps: float = 1e-7) -> Tensor:
    r"""The non-distributed Newton-Schulz iteration: PyTorch's (torch.optim.Muon's)."""
    return _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps)


def _check_ns_arguments(grad: Tensor, ns_coefficients: Tuple[float, float, float], ns_steps: int) -> None:
    # The checks and messages of PyTorch's _zeropower_via_newtonschulz.
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.dim() != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")


def _distributed_zeropower_via_newtonschulz(local: Tensor, ns_coefficients: Tuple[float, float, float],
                                            ns_steps: int, eps: float, process_group: Any) -> Tensor:
    r"""Newton-Schulz of a matrix whose columns are split across ``process_group``; returns this rank's columns.

    ``X X^T`` is the sum over the ranks of their column blocks' ``X_i X_i^T``,
    and each update ``X <- a X + (b G + c G G) X`` acts on each column block
    by itself, so one all-reduce of the ``[m, m]`` Gram matrix per step is all
    the ranks share. No transpose: ``(X X^T) X`` equals ``X (X^T X)``.
    """
    _check_ns_arguments(local, ns_coefficients, ns_steps)
    a, b, c = ns_coefficients
    x = local.bfloat16()
    norm_sq = x.pow(2).sum()
    dist.all_reduce(norm_sq, group=process_group)
    x = x / norm_sq.sqrt().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        dist.all_reduce(gram, group=process_group)
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


def _newtonschulz_by_owner(update: Tensor, param: DTensor, index: int, ns_coefficients: Tuple[float, float, float],
                           ns_steps: int, eps: float, group: Any) -> DTensor:
    r"""Newton-Schulz of a sharded update by rank ``index % world``, broadcast, re-sharded."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    owner = index % world
    full = DTensor.from_local(update, param.device_mesh, param.placements).full_tensor()  # every rank takes part
    if rank == owner:
        ortho = _zeropower_via_newtonschulz(full, ns_coefficients, ns_steps, eps).contiguous()
    else:
        ortho = torch.empty(full.shape, dtype=torch.bfloat16, device=full.device)
    dist.broadcast(ortho, src=dist.get_global_rank(group, owner), group=group)
    local = ortho.chunk(world, dim=_shard_dim(param))[rank].to(full.dtype).contiguous()
    return DTensor.from_local(local, param.device_mesh, param.placements)


class _DistributedMuon(Optimizer):
    r"""Muon whose Newton-Schulz iteration works on DTensor shards (torch_npu's private class).

    Args:
        params: 2-D parameters (tensors or DTensors).
        lr (float): learning rate (default: 1e-3).
        weight_decay (float): decoupled weight decay (default: 0.1).
        momentum (float): momentum factor (default: 0.95).
        nesterov (bool): Nesterov momentum (default: True).
        ns_coefficients (tuple): the quintic's coefficients (a, b, c) (default: (3.4445, -4.7750, 2.0315)).
        eps (float): floor of the norm that scales the update (default: 1e-7).
        ns_steps (int): Newton-Schulz steps (default: 5).
        adjust_lr_fn (str, optional): ``"original"`` (or ``None``) or ``"match_rms_adamw"``.
        process_group (ProcessGroup, optional): the group DTensor parameters are sharded over;
            ``None``: every parameter takes the non-distributed path.
    """

    def __init__(self, params: Any, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: Tuple[float, float, float] = DEFAULT_NS_COEFFICIENTS,
                 eps: float = 1e-7, ns_steps: int = 5, adjust_lr_fn: Optional[str] = None,
                 process_group: Optional[Any] = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn, process_group=process_group)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"_DistributedMuon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )

    def _orthogonalize(self, update: Tensor, param: Tensor, index: int, group: dict) -> Tensor:
        process_group, shard = group["process_group"], _shard_dim(param)
        args = (group["ns_coefficients"], group["ns_steps"], group["eps"])
        if process_group is None or shard is None:
            return _zeropower_via_newtonschulz(update, *args)
        if shard == 1:
            local = _distributed_zeropower_via_newtonschulz(update, *args, process_group)
            return DTensor.from_local(local, param.device_mesh, param.placements)
        return _newtonschulz_by_owner(update, param, index, *args, process_group)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        r"""Perform one optimization step."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"].item() if isinstance(group["lr"], Tensor) else group["lr"]
            momentum = group["momentum"]
            index = 0
            for p in group["params"]:
                if p.grad is None:
                    continue
                if torch.is_complex(p):
                    raise RuntimeError("_DistributedMuon does not support complex parameters")
                if p.grad.is_sparse:
                    raise RuntimeError("_DistributedMuon does not support sparse gradients")
                sharded = group["process_group"] is not None and _shard_dim(p) is not None
                grad = p.grad._local_tensor if sharded and isinstance(p.grad, DTensor) else p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                local_buf = buf._local_tensor if sharded and isinstance(buf, DTensor) else buf
                local_buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(local_buf, momentum) if group["nesterov"] else local_buf
                update = self._orthogonalize(update, p, index, group)
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
                index += 1
        return loss

