"""``torch_npu.profiler``: torch_npu's profiler entry points on the simulated NPU.

torch_npu's profiler writes Ascend's own data (msprof) and analyses it offline.
There is no Ascend toolkit here: these entry points delegate to
:mod:`torch.profiler`, whose Kineto collects the npu's device activities through
the backend's PrivateUse1 activity profiler (``csrc/profiler``). A trace shows
one row per (device, stream) with every kernel, copy, memset and event
record/wait the device ran, each linked to the CPU op that queued it;
``key_averages()`` reports device times. ``ProfilerActivity.NPU`` is
``torch.profiler.ProfilerActivity.PrivateUse1``.

What torch_npu offers and this package does not (Ascend hardware data, offline
analysis, its ``_ExperimentalConfig``) is listed in docs/COMPATIBILITY.md.
"""

from . import profiler as _profiler
from .profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = list(_profiler.__all__)
