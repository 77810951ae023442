"""torch_npu's profiler API over :mod:`torch.profiler` (see the package docstring)."""

import os
import warnings
from typing import Any, Callable, Iterable, Optional, Set

import torch.profiler as _tp

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]

#: What the profiler should do at a step (PyTorch's enum).
ProfilerAction = _tp.ProfilerAction
#: The step schedule of :class:`profile` (PyTorch's ``torch.profiler.schedule``).
schedule = _tp.schedule


class ProfilerActivity:
    """The activities torch_npu's profiler collects, as torch_npu names them.

    ``CPU`` is ``torch.profiler.ProfilerActivity.CPU``; ``NPU`` is
    ``torch.profiler.ProfilerActivity.PrivateUse1``, the npu's device
    activities. The members are PyTorch's, so they can be passed to
    ``torch.profiler.profile`` as well.
    """

    CPU = _tp.ProfilerActivity.CPU
    NPU = _tp.ProfilerActivity.PrivateUse1


def supported_activities() -> Set[_tp.ProfilerActivity]:
    """The activities :class:`profile` can collect: ``{CPU, NPU}``."""
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def _checked_activities(activities: Optional[Iterable[Any]]) -> Set[_tp.ProfilerActivity]:
    if activities is None:
        return supported_activities()
    chosen = set()
    for activity in activities:
        if activity not in supported_activities():
            raise ValueError(
                f"torch_npu.profiler.profile: unsupported activity {activity!r}; "
                f"use torch_npu.profiler.ProfilerActivity.CPU and/or .NPU")
        chosen.add(activity)
    if not chosen:
        raise ValueError("torch_npu.profiler.profile: activities must not be empty; "
                         "use ProfilerActivity.CPU and/or ProfilerActivity.NPU")
    return chosen


class profile(_tp.profile):
    """torch_npu's ``profile``: ``torch.profiler.profile`` with npu device activities.

    Takes torch_npu's arguments. ``activities`` defaults to CPU and NPU (as
    torch_npu's); everything else behaves as in ``torch.profiler.profile``:
    ``schedule``, ``on_trace_ready`` (e.g. :func:`tensorboard_trace_handler`),
    ``step()``, ``export_chrome_trace``, ``key_averages``.

    Args:
        activities: iterable of :class:`ProfilerActivity` members.
        experimental_config: torch_npu's Ascend-specific settings. Only ``None``
            is accepted: the simulator has no Ascend profiling levels or AI
            core metrics.
        use_cuda: deprecated and ignored, as in torch_npu (a warning says so).

    Raises:
        ValueError: an activity other than CPU or NPU, or an empty set.
        NotImplementedError: an ``experimental_config``.
    """

    def __init__(
        self,
        *,
        activities: Optional[Iterable[Any]] = None,
        schedule: Optional[Callable[[int], ProfilerAction]] = None,
        on_trace_ready: Optional[Callable[..., Any]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        use_cuda: Optional[bool] = None,
        **kwargs: Any,
    ) -> None:
        if experimental_config is not None:
            raise NotImplementedError(
                "torch_npu.profiler.profile: experimental_config (Ascend profiler levels, AI "
                "core metrics, export types) has no meaning on the simulated NPU; pass None")
        if use_cuda is not None:
            warnings.warn("This is npu environment, use_cuda is invalid", stacklevel=2)
        super().__init__(
            activities=_checked_activities(activities),
            schedule=schedule,
            on_trace_ready=on_trace_ready,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            **kwargs,
        )


def tensorboard_trace_handler(
    dir_name: Optional[str] = None,
    worker_name: Optional[str] = None,
    analyse_flag: bool = True,
    async_mode: bool = False,
) -> Callable[[Any], None]:
    """An ``on_trace_ready`` handler that writes each trace to ``dir_name``.

    The file is a Chrome trace (``<worker_name>.<timestamp>.pt.trace.json``)
    that TensorBoard's profiler plugin, Perfetto and ``chrome://tracing``
    open, written by ``torch.profiler.tensorboard_trace_handler``. torch_npu
    writes raw Ascend data there and analyses it afterwards; here the trace
    is complete when written, so ``analyse_flag`` and ``async_mode`` have
    nothing to control (non-bool values are warned about and replaced by the
    defaults, as torch_npu does).

    Args:
        dir_name: output directory (created if needed); default: the
            current directory, as torch_npu's.
        worker_name: file name prefix; default: ``<hostname>_<pid>``.
    """
    if dir_name is None:
        dir_name = os.getcwd()
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(
            f"tensorboard_trace_handler: dir_name must be a path, got {type(dir_name).__name__}")
    if not isinstance(analyse_flag, bool):
        warnings.warn("analyse_flag is not bool, set by default.", stacklevel=2)
    if not isinstance(async_mode, bool):
        warnings.warn("async_mode is not bool, set by default.", stacklevel=2)
    return _tp.tensorboard_trace_handler(os.fspath(dir_name), worker_name)
