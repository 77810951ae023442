"""torch_npu's FLOP counter: ``torch_npu.utils.FlopsCounter``.

Counts the floating-point operations of the matrix products and
convolutions run on npu (mm, addmm, bmm, baddbmm and what decomposes into
them: matmul, linear, attention's math path; convolutions forward and
backward), by PyTorch's formulas (a multiply-add is 2 FLOPs). Ops are counted
when they are called, on every thread, not when the device runs them.

Example::

    >>> counter = torch_npu.utils.FlopsCounter()
    >>> counter.start()
    >>> y = model(x)
    >>> recorded, traversed = counter.get_flops()
    >>> counter.stop()  # also resets the counts

``pause()``/``resume()`` bracket work that is traversed but not recorded (e.g.
recomputation): it is added to the second count only.
"""

import warnings
from types import TracebackType
from typing import Optional

import torch_npu

__all__: list[str] = []


class _FlopsCounter:
    r"""Handle on the process-wide FLOP counter (``torch_npu._C._flops_count``).

    Every instance drives the same counter: there is one per process, as in
    torch_npu.
    """

    def __init__(self) -> None:
        self.flop_count_instance = torch_npu._C._flops_count._FlopCountContext.GetInstance()

    def __enter__(self) -> "_FlopsCounter":
        r"""Start counting (``with FlopsCounter() as c:``); see :meth:`start`."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        r"""Stop counting, keeping the counts readable by :meth:`get_flops`."""
        self.flop_count_instance.disable()

    def start(self) -> None:
        r"""Start counting the FLOPs of later npu ops (the counts are kept)."""
        self.flop_count_instance.enable()

    def stop(self) -> None:
        r"""Stop counting and zero the counts (and resume a paused counter)."""
        self.flop_count_instance.disable()
        self.flop_count_instance.reset()

    def pause(self) -> None:
        r"""Until :meth:`resume`, count ops in the traversed count only."""
        self.flop_count_instance.pause()

    def resume(self) -> None:
        r"""Count ops in the recorded count again."""
        self.flop_count_instance.resume()

    def get_flops(self) -> list[int]:
        r"""``[recorded, traversed]``: FLOPs counted while not paused, and in all."""
        recorded_count = self.flop_count_instance.recordedCount
        traversed_count = self.flop_count_instance.traversedCount
        return [recorded_count, traversed_count]


class FlopsCounter(_FlopsCounter):
    r"""Deprecated spelling of ``torch_npu.utils.FlopsCounter`` (warns ``FutureWarning``)."""

    def __init__(self) -> None:
        super().__init__()
        warnings.warn(
            "torch_npu.utils.flops_count.FlopsCounter() will be deprecated. "
            "If necessary, please use torch_npu.utils.FlopsCounter().",
            FutureWarning,
            stacklevel=2,
        )
