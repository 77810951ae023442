"""Memory management of ``torch_npu.npu`` (names follow ``torch.cuda``)."""

from typing import Any, Dict, Union

import torch

from .. import _C
from .utils import _checked_index, _lazy_init

__all__ = [
    "empty_cache",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]

_DeviceLike = Union[torch.device, str, int, None]


def empty_cache() -> None:
    r"""Release all unused cached device memory back to the runtime."""
    _lazy_init()
    _C._npu_emptyCache()


def memory_stats(device: _DeviceLike = None) -> Dict[str, Any]:
    r"""Allocator statistics of a device, keyed as ``torch.cuda.memory_stats``."""
    _lazy_init()
    return dict(sorted(_C._npu_memoryStats(_checked_index(device)).items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    r"""Bytes currently occupied by tensors on ``device``."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    r"""Peak of :func:`memory_allocated` since start or the last reset."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    r"""Bytes held by the caching allocator on ``device`` (in use + cached)."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    r"""Peak of :func:`memory_reserved` since start or the last reset."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    r"""Reset the peaks tracked by the allocator to the current values."""
    _lazy_init()
    _C._npu_resetPeakMemoryStats(_checked_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    r"""Reset the allocator's counters (allocations, retries, OOMs)."""
    _lazy_init()
    _C._npu_resetAccumulatedMemoryStats(_checked_index(device))


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    r"""A human-readable table of the allocator's state on ``device``."""
    _lazy_init()
    return _C._npu_memorySummary(_checked_index(device))
