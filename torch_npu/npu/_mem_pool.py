"""Private memory pools of the caching allocator (``torch.npu.MemPool``,
``use_mem_pool``), re-exported by :mod:`torch_npu.npu.memory`. See Note
[Private memory pools] in ``csrc/core/NPUBlockPool.h``.
"""

import contextlib
from typing import Any, Dict, Iterator, List, Tuple, Union

import torch

from .. import _C
from ._memory_history import memory_snapshot
from ._pluggable_allocator import _NPUAllocator
from .utils import _checked_index, _lazy_init

__all__ = ["MemPool", "use_mem_pool"]

_DeviceLike = Union[torch.device, str, int, None]


class MemPool:
    r"""A private pool of device memory in the caching allocator.

    Allocations made inside :func:`use_mem_pool` come from this pool's own
    segments, which are never handed to allocations outside it. The pool is
    created on the current device; the object holds one use of it, released
    when the object is garbage-collected. Once no use is left, the pool's
    free segments go back to the runtime at the next :func:`empty_cache`.

    Args:
        allocator: the pool's segments come from this allocator (an
            :class:`NPUPluggableAllocator`'s ``allocator()``, or the
            allocator object itself) instead of the runtime; ``None``: the
            runtime, as for every other segment.
        use_on_oom (bool): when an allocation outside every private pool
            finds no memory, it may take a free block of this pool before
            the cache is released (while this object is alive).
        no_split (bool): the pool never splits a segment: each allocation
            keeps a whole segment.
    """

    def __init__(self, allocator: Any = None, use_on_oom: bool = False,
                 no_split: bool = False) -> None:
        if isinstance(allocator, _NPUAllocator):
            allocator = allocator.allocator()
        if allocator is not None and not isinstance(allocator, _C._npu_NPUAllocator):
            raise TypeError("MemPool: allocator must be an NPUPluggableAllocator's allocator() "
                            f"or None, got {type(allocator).__name__}")
        for name, value in (("use_on_oom", use_on_oom), ("no_split", no_split)):
            if not isinstance(value, bool):
                raise TypeError(f"MemPool: {name} must be a bool, got {type(value).__name__}")
        _lazy_init()
        self._device = _C._npu_getDevice()
        self._id: Tuple[int, int] = tuple(_C._npu_mempoolNewId())
        self._allocator = allocator
        _C._npu_createOrIncrefPool(self._device, self._id, allocator, use_on_oom, no_split)

    @property
    def id(self) -> Tuple[int, int]:
        r"""The pool's id, a pair of ints."""
        return self._id

    @property
    def allocator(self) -> Any:
        r"""The allocator handle the pool was created with, or ``None``."""
        return self._allocator

    def use_count(self) -> int:
        r"""The pool's use count (this object, plus each active :func:`use_mem_pool`)."""
        return _C._npu_poolUseCount(self._device, self._id)

    def snapshot(self) -> List[Dict[str, Any]]:
        r"""The pool's segments, as :func:`memory_snapshot` reports them."""
        return memory_snapshot(self._id)

    def __del__(self) -> None:
        # As CUDA's MemPool: the pool's cached free segments go back to the
        # device with it, unless something (a graph) still uses the pool.
        try:
            _C._npu_releasePool(self._device, self._id)
            if _C._npu_poolUseCount(self._device, self._id) == 0:
                _C._npu_emptyCache(self._id)
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to release to
            pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: _DeviceLike = None) -> Iterator[None]:
    r"""Route the calling thread's allocations on ``device`` to ``pool``.

    Only this thread's allocations are routed; threads started inside the
    context allocate as usual.
    """
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool expects a MemPool, but got {type(pool).__name__}")
    index = _checked_index(device)
    _C._npu_beginAllocateCurrentThreadToPool(index, pool.id)
    try:
        yield
    finally:
        _C._npu_endAllocateToPool(index, pool.id)
        _C._npu_releasePool(index, pool.id)
