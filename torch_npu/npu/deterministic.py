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

from typing import Any, Callable, Tuple

import torch
from torch import Tensor

__all__ = ["disable_deterministic_with_backward", "enable_deterministic_with_backward"]


def _not_traceable(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._dynamo_forbidden = True  # Dynamo raises on a call to it, as torch_npu's markers do
    return fn


class _DeterministicSwitch(torch.autograd.Function):
    # Sets the switch to `on` in the forward pass and back to `not on` when
    # the backward pass reaches it; `name` labels both in profiles.
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, on: bool, name: str) -> Tensor:
        ctx.on, ctx.name = on, name
        with torch.autograd.profiler.record_function(f"{name}_forward"):
            torch.use_deterministic_algorithms(on)
        return tensor

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None]:
        with torch.autograd.profiler.record_function(f"{ctx.name}_backward"):
            torch.use_deterministic_algorithms(not ctx.on)
        return grad, None, None


@_not_traceable
def enable_deterministic_with_backward(tensor: Tensor) -> Tensor:
    r"""Turn deterministic algorithms on from here in the forward pass, off from here in the backward."""
    return _DeterministicSwitch.apply(tensor, True, "deterministic_algorithms_begin_op")


@_not_traceable
def disable_deterministic_with_backward(tensor: Tensor) -> Tensor:
    r"""Turn deterministic algorithms off from here in the forward pass, on from here in the backward."""
    return _DeterministicSwitch.apply(tensor, False, "deterministic_algorithms_end_op")
