r"""``torch.cond`` inside NPU graph captures, as conditional nodes.

Captured naively, ``torch.cond`` would record only the branch its predicate
selects at capture time, and every replay would run that branch. Under
:class:`NPUGraphCaptureControlFlowOpDispatchMode` each ``torch.cond`` records
both branches instead, each as the body of an *if node* of the graph: a replay
runs the branch the predicate tensor selects at that point of the replay
(docs/GRAPHS.md, "Data-dependent control flow"). torch_npu's module of the same
name, and ``torch._higher_order_ops.cudagraph_conditional_nodes`` for CUDA.

Example::

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g), NPUGraphCaptureControlFlowOpDispatchMode():
        out = torch.cond(pred, torch.sin, torch.cos, (x,))
    pred.fill_(False)
    g.replay()  # out now holds x.cos()
"""

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["NPUGraphCaptureControlFlowOpDispatchMode", "ControlFlowOpWarmupDispatchMode"]


class NPUGraphCaptureControlFlowOpDispatchMode(TorchDispatchMode):
    r"""Capture every ``torch.cond`` run under this mode as conditional nodes.

    Use it inside a capture (:class:`torch.npu.graph`); nested ``torch.cond``
    calls nest the nodes. Every other op runs as usual.
    """

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self) -> None:
        self.supports_higher_order_operators = True
        super().__init__()

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Any = None) -> Any:
        if func is torch.ops.higher_order.cond:
            # Entered again so that a torch.cond inside a branch nests.
            with self:
                return if_else_node(*args)
        return func(*args, **(kwargs or {}))


class ControlFlowOpWarmupDispatchMode(TorchDispatchMode):
    r"""Warm up both branches of every eager ``torch.cond`` before a capture.

    Eagerly only one branch runs, so the other never did its one-time work
    (lazy initialisation, compilation) before the capture records it. Under
    this mode an eager ``torch.cond`` first records both branches into a
    throw-away relaxed capture on a side stream (recording runs nothing on
    the device), then runs eagerly as usual. Inside a capture it records
    conditional nodes, as :class:`NPUGraphCaptureControlFlowOpDispatchMode`.
    """

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self) -> None:
        super().__init__()
        self.supports_higher_order_operators = True
        self.capture_stream = torch.npu.Stream()

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.ops.higher_order.cond:
            return func(*args, **kwargs)
        if torch.npu.is_current_stream_capturing():
            with self:
                return if_else_node(*args)
        with torch.npu.graph(torch.npu.NPUGraph(), stream=self.capture_stream,
                             capture_error_mode="relaxed"), self:
            if_else_node(*args)
        return func(*args, **kwargs)


@contextmanager
def _if_body(pred: torch.Tensor) -> Generator[None, None, None]:
    graph = torch.npu.NPUGraph.get_currently_capturing_graph()
    graph.begin_capture_to_if_node(pred)
    try:
        yield
    finally:
        graph.end_capture_to_conditional_node()


def if_else_node(pred: torch.Tensor, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
                 operands: Sequence[Any]) -> Any:
    r"""Record ``torch.cond(pred, true_fn, false_fn, operands)`` as two if nodes.

    The first node runs ``true_fn`` when ``pred`` holds, the second ``false_fn``
    when ``logical_not(pred)`` does and copies its results into the first
    branch's outputs, so the ops captured after the call read one set of
    tensors whichever branch a replay takes.

    Raises:
        ValueError: ``pred`` is not a tensor on an NPU device.
        RuntimeError: ``pred`` is not a one-element bool tensor of the capture's
            device, or no capture records on the current stream.
    """
    if not isinstance(pred, torch.Tensor) or pred.device.type != "npu":
        raise ValueError(
            "Conditions must be on an npu device to use conditional nodes in npu graphs "
            f"(got {type(pred).__name__}"
            f"{' on ' + str(pred.device) if isinstance(pred, torch.Tensor) else ''})")
    with _if_body(pred):
        outputs = true_fn(*operands)
    negated = torch.logical_not(pred)
    with _if_body(negated):
        else_outputs = false_fn(*operands)
        for out, other in zip(pytree.tree_iter(outputs), pytree.tree_iter(else_outputs)):
            out.copy_(other)
    return outputs
