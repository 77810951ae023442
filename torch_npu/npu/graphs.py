"""Graph capture, task groups, super-kernel scopes, callbacks and reports.

The simulated NPU has none of these. Each API exists so that code written for
torch_npu fails the way it would on an NPU: on an external stream (compat
mode) with torch_npu's refusal ("External NPU stream is not supported in
<api>. This path requires a torch_npu-managed stream."), otherwise with a
clear "not supported on the simulated NPU" ``RuntimeError``.
"""

from typing import Any, Callable, Optional

import torch

from .. import _C

__all__ = [
    "NPUGraph",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "launch_callback",
    "subscribe_report",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "unsubscribe_report",
]


def _unsupported(api: str, stream: Optional[torch.Stream], current: bool = False) -> None:
    # Refusal of external streams first (torch_npu's text), then the simulator's.
    _C._npu_checkManagedOnly(stream, api, current)
    raise RuntimeError(f"{api} is not supported on the simulated NPU.")


class NPUGraph:
    r"""torch_npu's graph object; capture is not supported on the simulated NPU."""

    def capture_begin(self, pool=None, capture_error_mode="global"):  # type: (Any, str) -> None
        r"""Begin capture on the current stream (raises)."""
        _unsupported("NPUGraph::capture_begin", None)

    def capture_end(self):  # type: () -> None
        r"""End capture on the current stream (raises)."""
        _unsupported("NPUGraph::capture_end", None)


def graph_task_group_begin(stream):  # type: (torch.Stream) -> None
    r"""Begin a graph task group on ``stream`` (raises)."""
    _unsupported("graph_task_group_begin", stream)


def graph_task_group_end(stream):  # type: (torch.Stream) -> None
    r"""End a graph task group on ``stream`` (raises)."""
    _unsupported("graph_task_group_end", stream)


def graph_task_update_begin(stream, handle):  # type: (torch.Stream, Any) -> None
    r"""Begin a graph task update on ``stream`` (raises)."""
    _unsupported("graph_task_update_begin", stream)


def graph_task_update_end(stream):  # type: (torch.Stream) -> None
    r"""End a graph task update on ``stream`` (raises)."""
    _unsupported("graph_task_update_end", stream)


def super_kernel_scope_begin(scope_name=None):  # type: (Optional[str]) -> None
    r"""Begin a super-kernel scope on the current stream (raises)."""
    _unsupported("super_kernel_scope_begin", None)


def super_kernel_scope_end(scope_name=None):  # type: (Optional[str]) -> None
    r"""End a super-kernel scope on the current stream (raises)."""
    _unsupported("super_kernel_scope_end", None)


def launch_callback(callback, stream=None):  # type: (Callable[[], None], Optional[torch.Stream]) -> None
    r"""Launch a host callback on ``stream`` (current if ``None``) (raises)."""
    _unsupported("launch_callback", stream)


def subscribe_report(stream):  # type: (torch.Stream) -> None
    r"""Subscribe to task reports of ``stream`` (raises)."""
    _unsupported("subscribe_report", stream)


def unsubscribe_report(stream):  # type: (torch.Stream) -> None
    r"""Unsubscribe from task reports of ``stream`` (raises)."""
    _unsupported("unsubscribe_report", stream)
