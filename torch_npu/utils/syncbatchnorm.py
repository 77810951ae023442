"""torch_npu's ``torch_npu.utils.syncbatchnorm.SyncBatchNorm``: the autograd
function of a batch norm synchronised over a process group.

``torch.nn.SyncBatchNorm`` does not use it (it calls PyTorch's own function,
``torch.nn.modules._functions.SyncBatchNorm``, over the npu kernels of
csrc/aten/SyncBatchNorm.cpp); torch_npu exports it for code that applies it
directly, with the same arguments as PyTorch's. torch_npu's forward gathers
per-rank sums and sums of squares with two NPU-only ops
(``torch_npu.batch_norm_reduce``, ``torch_npu.batch_norm_gather_stats_update``);
here each rank gathers its mean, invstd and count instead, which combine to
the same statistics (Note [SyncBatchNorm kernels]). What it keeps of
torch_npu's: every rank's input must be non-empty, all ranks' statistics are
all-gathered as a list, a batch of one value per channel raises
``ValueError``, and the backward is torch_npu's.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
import torch.distributed as dist
from torch.autograd.function import Function

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(Function):
    """Batch norm over the union of every rank's batch (see the module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        input_tensor: torch.Tensor,
        weight: Optional[torch.Tensor],
        bias: Optional[torch.Tensor],
        running_mean: Optional[torch.Tensor],
        running_var: Optional[torch.Tensor],
        eps: float,
        momentum: float,
        process_group: Any,
        world_size: int,
    ) -> torch.Tensor:
        input_tensor = input_tensor.contiguous()
        mean, invstd = torch.batch_norm_stats(input_tensor, eps)
        count = torch.full(
            (1,), input_tensor.numel() // input_tensor.size(1), dtype=mean.dtype, device=mean.device
        )
        num_channels = input_tensor.shape[1]
        # C, C, 1 -> (2C + 1), gathered from every rank.
        combined = torch.cat([mean, invstd, count], dim=0)
        combined_list = [torch.empty_like(combined) for _ in range(world_size)]
        dist.all_gather(combined_list, combined, process_group, async_op=False)
        combined = torch.stack(combined_list, dim=0)
        mean_all, invstd_all, count_all = torch.split(combined, num_channels, dim=1)

        size = int(count_all.sum().item())
        if size == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {size}"
            )
        counts = count_all.view(-1)
        if running_mean is not None and counts.dtype != running_mean.dtype:
            counts = counts.to(running_mean.dtype)
        mean, invstd = torch.batch_norm_gather_stats_with_counts(
            input_tensor, mean_all, invstd_all, running_mean, running_var, momentum, eps, counts
        )
        ctx.save_for_backward(input_tensor, weight, mean, invstd, count_all.to(torch.int32))
        ctx.process_group = process_group
        return torch.batch_norm_elemt(input_tensor, weight, bias, mean, invstd, eps)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
        if not grad_output.is_contiguous(memory_format=torch.channels_last):
            grad_output = grad_output.contiguous()
        saved_input, weight, mean, invstd, count_tensor = ctx.saved_tensors
        grad_input = None
        sum_dy, sum_dy_xmu, grad_weight, grad_bias = torch.batch_norm_backward_reduce(
            grad_output,
            saved_input,
            mean,
            invstd,
            weight,
            ctx.needs_input_grad[0],
            ctx.needs_input_grad[1],
            ctx.needs_input_grad[2],
        )
        if ctx.needs_input_grad[0]:
            # The two sums over every rank's batch give the input's gradient.
            num_channels = sum_dy.shape[0]
            combined = torch.cat([sum_dy, sum_dy_xmu], dim=0)
            dist.all_reduce(combined, dist.ReduceOp.SUM, ctx.process_group, async_op=False)
            sum_dy, sum_dy_xmu = torch.split(combined, num_channels)
            grad_input = torch.batch_norm_backward_elemt(
                grad_output, saved_input, mean, invstd, weight, sum_dy, sum_dy_xmu, count_tensor
            )
        # grad_weight and grad_bias stay local: data parallelism reduces them.
        if weight is None or not ctx.needs_input_grad[1]:
            grad_weight = None
        if weight is None or not ctx.needs_input_grad[2]:
            grad_bias = None
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
