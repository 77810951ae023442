"""Memory management of ``torch_npu.npu`` (names and shapes follow ``torch.cuda``
and torch_npu).

The device allocator is a caching allocator per device with CUDA's design:
segments from the runtime, split into blocks and merged again, small (<= 1 MiB)
and large pools, stream-aware reuse (``Tensor.record_stream``), private pools
(:class:`MemPool`). See ``docs/ARCHITECTURE.md`` and ``PYTORCH_NPU_ALLOC_CONF``
in the README.
"""

import collections
import warnings
from typing import Any, Dict, Optional, Tuple, Union

import torch

from .. import _C
from ._memory_history import _dump_snapshot, _record_memory_history, _snapshot, memory_snapshot
from ._mem_pool import MemPool, use_mem_pool
from ._pluggable_allocator import NPUPluggableAllocator, _get_current_allocator, change_current_allocator
from .utils import _checked_index, _lazy_init, current_stream, is_initialized

__all__ = [
    "MemPool",
    "NPUPluggableAllocator",
    "OutOfMemoryError",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "change_current_allocator",
    "empty_cache",
    "empty_virt_addr_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
    "use_mem_pool",
]

_DeviceLike = Union[torch.device, str, int, None]

#: Raised when the device (or the per-process memory fraction) cannot hold an
#: allocation even after the cache was released. The same class as
#: ``torch.OutOfMemoryError`` (and ``torch.cuda.OutOfMemoryError``), a
#: subclass of ``RuntimeError``.
OutOfMemoryError = torch.OutOfMemoryError


def _flatten(prefix: str, value: Any, out: list) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, sub, out)
    else:
        out.append((prefix, value))


def caching_allocator_alloc(size: int, device: _DeviceLike = None,
                            stream: Optional[torch.Stream] = None) -> int:
    r"""Allocate ``size`` bytes with the caching allocator and return the address.

    For interoperability with other libraries. The memory is tagged with
    ``stream`` (default: the current stream of ``device``) like a tensor
    allocated there, and must be released with :func:`caching_allocator_delete`.

    Args:
        size (int): number of bytes.
        device (torch.device, str or int, optional): the device; the current
            device if ``None``.
        stream (torch.npu.Stream, optional): the allocation stream.
    """
    _lazy_init()
    index = _checked_index(device)
    if stream is None:
        stream = current_stream(index)
    if not isinstance(stream, torch.Stream):
        raise TypeError("Invalid type for stream argument, must be `torch_npu.npu.Stream`, "
                        f"but got {type(stream).__name__}")
    if stream.device_index != index:
        raise ValueError(f"caching_allocator_alloc: stream is on device {stream.device_index}, "
                         f"but device {index} was requested")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"caching_allocator_alloc: expected a size in bytes >= 0, but got {size!r}")
    return _C._npu_cachingAllocator_raw_alloc(size, stream.stream_id, stream.device_index,
                                              stream.device_type)


def caching_allocator_delete(mem_ptr: int) -> None:
    r"""Free memory returned by :func:`caching_allocator_alloc`.

    Raises ``RuntimeError`` for an address that is not such an allocation.
    """
    _C._npu_cachingAllocator_raw_delete(mem_ptr)


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    r"""Limit the memory the caching allocator may reserve on ``device``.

    Reserved memory (segments held from the runtime) may not exceed
    ``fraction * total_memory``; an allocation that would cross the limit
    raises :class:`OutOfMemoryError` after the cache was released.

    Args:
        fraction (float): in ``[0, 1]``.
        device (torch.device, str or int, optional): the current device if ``None``.
    """
    _lazy_init()
    index = _checked_index(device)
    if not isinstance(fraction, float):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, but got "
                        f"{type(fraction).__name__}")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._npu_setMemoryFraction(fraction, index)


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    r"""The fraction set by :func:`set_per_process_memory_fraction` (1.0 by default)."""
    _lazy_init()
    return _C._npu_getMemoryFraction(_checked_index(device))


def empty_cache() -> None:
    r"""Release all unused cached device memory back to the runtime.

    Whole free segments of every device are released (those of private pools
    no :class:`MemPool` uses any more too); pieces of segments that still hold
    live tensors stay reserved.
    """
    _lazy_init()
    _C._npu_emptyCache()


def empty_virt_addr_cache() -> None:
    r"""A lighter :func:`empty_cache` for expandable segments (torch_npu's).

    Unmaps the free pages of expandable segments, as :func:`empty_cache`
    does, but keeps their physical memory for the segments' next growth
    instead of releasing it: it leaves ``memory_reserved()`` but still takes
    device memory (:func:`mem_get_info`) until :func:`empty_cache`.
    Raises ``RuntimeError`` unless ``expandable_segments:True`` is in force.
    """
    if is_initialized():
        _C._npu_emptyVirtAddrCache()


def mem_get_info(device: _DeviceLike = None) -> Tuple[int, int]:
    r"""Return ``(free, total)`` bytes of device memory, as the runtime reports them.

    ``free`` counts memory not held by anyone, so memory cached by the
    allocator is not free.
    """
    _lazy_init()
    return tuple(_C._npu_memGetInfo(_checked_index(device)))


def memory_stats_as_nested_dict(device: _DeviceLike = None) -> Dict[str, Any]:
    r"""The result of :func:`memory_stats` as a nested dictionary."""
    _lazy_init()
    return _C._npu_memoryStats(_checked_index(device))


def memory_stats(device: _DeviceLike = None) -> "collections.OrderedDict[str, int]":
    r"""Allocator statistics of ``device`` with ``torch.cuda.memory_stats``'s keys.

    ``{allocation, segment, active, inactive_split, allocated_bytes,
    reserved_bytes, active_bytes, inactive_split_bytes,
    requested_bytes}.{all, small_pool, large_pool}.{current, peak, allocated,
    freed}``, ``oversize_allocations.*`` and ``oversize_segments.*``
    (``current``/``peak``/``allocated``/``freed``), and the counters
    ``num_alloc_retries``, ``num_ooms``, ``num_sync_all_streams``,
    ``num_device_alloc``, ``num_device_free``, ``max_split_size`` (-1: no
    limit) and torch_npu's ``num_oom_rejections`` (segments refused by
    ``throw_on_npumalloc_oom``). Sizes are bytes rounded up to multiples of 512, except
    ``requested_bytes`` (what was asked for).

    Returns:
        an ``OrderedDict`` sorted by key.
    """
    flat: list = []
    _flatten("", memory_stats_as_nested_dict(device), flat)
    flat.sort()
    return collections.OrderedDict(flat)


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    r"""Reset the ``allocated``/``freed`` totals and the counters (retries, OOMs, ...)."""
    _lazy_init()
    _C._npu_resetAccumulatedMemoryStats(_checked_index(device))


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    r"""Reset every ``peak`` statistic to its current value."""
    _lazy_init()
    _C._npu_resetPeakMemoryStats(_checked_index(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    r"""Reset the peak of :func:`memory_allocated`.

    .. warning:: Resets all peaks, as :func:`reset_peak_memory_stats` does
        (deprecated in ``torch.cuda`` for that reason).
    """
    warnings.warn("torch_npu.npu.reset_max_memory_allocated now calls "
                  "torch_npu.npu.reset_peak_memory_stats, which resets /all/ peak memory stats.",
                  FutureWarning)
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: _DeviceLike = None) -> None:
    r"""Reset the peak of :func:`memory_reserved` (and, as above, all peaks)."""
    warnings.warn("torch_npu.npu.reset_max_memory_cached now calls "
                  "torch_npu.npu.reset_peak_memory_stats, which resets /all/ peak memory stats.",
                  FutureWarning)
    reset_peak_memory_stats(device)


def memory_allocated(device: _DeviceLike = None) -> int:
    r"""Bytes currently occupied by tensors on ``device`` (rounded block sizes)."""
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


def memory_cached(device: _DeviceLike = None) -> int:
    r"""Deprecated; see :func:`memory_reserved`."""
    warnings.warn("torch_npu.npu.memory_cached has been renamed to torch_npu.npu.memory_reserved",
                  DeprecationWarning)
    return memory_reserved(device)


def max_memory_cached(device: _DeviceLike = None) -> int:
    r"""Deprecated; see :func:`max_memory_reserved`."""
    warnings.warn("torch_npu.npu.max_memory_cached has been renamed to "
                  "torch_npu.npu.max_memory_reserved", DeprecationWarning)
    return max_memory_reserved(device)


def _format_size(size: int, reference: int) -> str:
    prefixes = ["B ", "KB", "MB", "GB", "TB", "PB"]
    prefix = prefixes[0]
    for candidate in prefixes[1:]:
        if reference < 768 * 1024:
            break
        prefix = candidate
        size //= 1024
        reference /= 1024
    return f"{size:7d} {prefix}"


def _format_count(count: int, reference: int) -> str:
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for candidate in prefixes[1:]:
        if reference < 750 * 1000:
            break
        prefix = candidate
        count //= 1000
        reference /= 1000
    return f"{count:7d} {prefix} "


def _summary_row(stats: Dict[str, int], key: str, name: str, formatter: Any,
                 reference: Optional[Dict[str, int]] = None) -> str:
    values = [stats[f"{key}.{m}"] for m in ("current", "peak", "allocated", "freed")]
    refs = values if reference is None else [reference[m] for m in ("current", "peak", "allocated", "freed")]
    cells = " | ".join(formatter(v, r) for v, r in zip(values, refs))
    return f" {name:<21} | {cells} "


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    r"""A human-readable table of the allocator's statistics, in torch_npu's layout.

    Args:
        device (torch.device, str or int, optional): the current device if ``None``.
        abbreviated (bool): only the ``all`` rows, without the per-pool ones.
    """
    index = _checked_index(device)
    stats = memory_stats(index)
    lines = [
        "=" * 75,
        f" {'':16} PyTorch NPU memory summary, device ID {index:<18d} ",
        "-" * 75,
        f"  {'':9} NPU OOMs: {stats['num_ooms']:<13d} | {'':6} npuMalloc retries: "
        f"{stats['num_alloc_retries']:<9d}  ",
        "=" * 75,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    metrics = [
        ("allocated_bytes", "Allocated memory", _format_size),
        ("active_bytes", "Active memory", _format_size),
        ("reserved_bytes", "NPU reserved memory", _format_size),
        ("inactive_split_bytes", "Non-releasable memory", _format_size),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "NPU reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    for key, name, formatter in metrics:
        lines.append("-" * 75)
        parts = [("all", name)]
        if not abbreviated:
            parts += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        reference = {m: stats[f"{key}.all.{m}"] for m in ("current", "peak", "allocated", "freed")}
        for part, label in parts:
            lines.append(_summary_row(stats, f"{key}.{part}", label, formatter, reference))
    for key, name in (("oversize_allocations", "Oversize allocations"),
                      ("oversize_segments", "Oversize NPU segments")):
        lines.append("-" * 75)
        lines.append(_summary_row(stats, key, name, _format_count))
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"


def get_allocator_backend() -> str:
    r"""The allocator backend: always ``"native"`` (the caching allocator)."""
    return _C._npu_getAllocatorBackend()


def _set_allocator_settings(settings: str) -> None:
    r"""Apply allocator options, in ``PYTORCH_NPU_ALLOC_CONF``'s syntax, to later
    allocations (e.g. ``"max_split_size_mb:64,garbage_collection_threshold:0.6"``).

    Raises ``ValueError`` naming a bad key or value; the settings then stay
    as they were.
    """
    if not isinstance(settings, str):
        raise TypeError(f"_set_allocator_settings expects a str, but got {type(settings).__name__}")
    _C._npu_npuCachingAllocator_set_allocator_settings(settings)


def host_empty_cache() -> None:
    r"""Release the cached (unused) pinned host memory back to the runtime.

    Blocks still used by queued copies are released once those copies ran.
    """
    _C._npu_hostEmptyCache()


def host_memory_stats() -> "collections.OrderedDict[str, Any]":
    r"""Statistics of the pinned host allocator, with ``torch.cuda.host_memory_stats``'s keys.

    - ``allocations.{current,peak,allocated,freed}`` and ``allocated_bytes.*``:
      pinned blocks the allocator holds from the runtime (in use and cached)
      and their bytes, rounded up to powers of two;
    - ``active_requests.*`` and ``active_bytes.*``: blocks handed out and not
      yet reusable. A block used by a ``non_blocking`` copy becomes reusable
      once the copy completed, not when its tensor is freed;
    - ``num_host_alloc`` / ``num_host_free``: blocks obtained from / returned to
      the runtime;
    - ``host_alloc_time.*`` / ``host_free_time.*`` (``total``, ``max``, ``min``,
      ``count``, ``avg``): microseconds spent in those runtime calls.

    ``current`` is the value now, ``peak`` its maximum since the last
    :func:`reset_peak_host_memory_stats`, ``allocated`` / ``freed`` the
    increases and decreases since the last
    :func:`reset_accumulated_host_memory_stats`.

    Returns:
        an ``OrderedDict`` sorted by key.
    """
    flat: list = []
    _flatten("", host_memory_stats_as_nested_dict(), flat)
    flat.sort()
    return collections.OrderedDict(flat)


def host_memory_stats_as_nested_dict() -> Dict[str, Any]:
    r"""Return :func:`host_memory_stats` as a nested dictionary."""
    return _C._npu_hostMemoryStats()


def reset_accumulated_host_memory_stats() -> None:
    r"""Reset the ``allocated`` / ``freed`` totals of the pinned host allocator's statistics.

    Also resets the ``total`` and ``count`` of ``host_alloc_time`` and
    ``host_free_time``.
    """
    _C._npu_resetAccumulatedHostMemoryStats()


def reset_peak_host_memory_stats() -> None:
    r"""Reset every ``peak`` of the pinned host allocator's statistics to its current value.

    Also resets the ``max`` and ``min`` of ``host_alloc_time`` and
    ``host_free_time``.
    """
    _C._npu_resetPeakHostMemoryStats()
