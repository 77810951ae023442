"""torch_npu's markers that switch deterministic algorithms on or off for a
region of a model, in its forward pass and again, mirrored, in its backward.

``y = enable_deterministic_with_backward(x)`` returns ``x`` unchanged and
turns ``torch.use_deterministic_algorithms`` on; when autograd reaches ``y``'s
gradient in the backward pass it turns them off again, so that the region
between two markers is deterministic in both directions.
``disable_deterministic_with_backward`` is the reverse. The switch is
PyTorch's process-wide one. The markers cannot be traced by ``torch.compile``
(they change global state): Dynamo refuses to trace them.
"""

from typing import Any, Callable

import torch
from torch import Tensor

__all__ = ["disable_deterministic_with_backward", "enable_deterministic_with_backward"]


def _not_traceable(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._dynamo_forbidden = True  # Dynamo raises on a call to it, as torch_npu's markers do
    return fn


def _switch(on: bool, label: str) -> None:
    with torch.autograd.profiler.record_function(label):
        torch.use_deterministic_algorithms(on)


class _EnableDeterministic(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor) -> Tensor:
        _switch(True, "deterministic_algorithms_begin_op_forward")
        return tensor

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        _switch(False, "deterministic_algorithms_begin_op_backward")
        return grad


class _DisableDeterministic(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor) -> Tensor:
        _switch(False, "deterministic_algorithms_end_op_forward")
        return tensor

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        _switch(True, "deterministic_algorithms_end_op_backward")
        return grad


@_not_traceable
def enable_deterministic_with_backward(tensor: Tensor) -> Tensor:
    r"""Turn deterministic algorithms on from here in the forward pass, off from here in the backward."""
    return _EnableDeterministic.apply(tensor)


@_not_traceable
def disable_deterministic_with_backward(tensor: Tensor) -> Tensor:
    r"""Turn deterministic algorithms off from here in the forward pass, on from here in the backward."""
    return _DisableDeterministic.apply(tensor)
