"""User allocators loaded from a shared library, as ``torch.cuda.memory.CUDAPluggableAllocator``.

Re-exported by :mod:`torch_npu.npu.memory` and :mod:`torch_npu.npu` with
torch_npu's names. An allocator is used either as the current allocator of
every npu tensor (:func:`change_current_allocator`, before the first npu
allocation) or as the segment source of one :class:`~torch_npu.npu.MemPool`.
See Note [Pluggable allocators] in ``csrc/core/NPUPluggableAllocator.h``.
"""

import ctypes
import os
from typing import Optional

from .. import _C

__all__ = ["NPUPluggableAllocator", "change_current_allocator"]


class _NPUAllocator:
    r"""Wrapper over an internal npu memory allocator.

    ``allocator()`` is the ``torch_npu._C._npu_NPUAllocator`` handle, or
    ``None`` for the built-in caching allocator.
    """

    def __init__(self, allocator: Optional["_C._npu_NPUAllocator"]) -> None:
        self._allocator = allocator

    def allocator(self) -> Optional["_C._npu_NPUAllocator"]:
        r"""The internal allocator handle (``None``: the caching allocator)."""
        return self._allocator


def _function_address(library: ctypes.CDLL, path: str, name: str) -> int:
    if not isinstance(name, str) or not name:
        raise TypeError(f"NPUPluggableAllocator: function names must be non-empty str, got {name!r}")
    try:
        function = getattr(library, name)
    except AttributeError:
        raise AttributeError(f"NPUPluggableAllocator: {path} has no function named {name!r}") from None
    return ctypes.cast(function, ctypes.c_void_p).value


class NPUPluggableAllocator(_NPUAllocator):
    r"""An npu memory allocator whose functions live in a ``.so`` file.

    Args:
        path_to_so_file (str): path of the shared library.
        alloc_fn_name (str): its allocation function, with the signature
            ``void* alloc(ssize_t size, int device, aclrtStream stream)``;
            returning ``NULL`` means out of memory.
        free_fn_name (str): its release function, with the signature
            ``void free(void* ptr, ssize_t size, int device, aclrtStream stream)``.

    The functions must not allocate npu tensors themselves. Use it with
    :func:`change_current_allocator` or ``MemPool(allocator.allocator())``.
    ``allocator()`` also offers torch_npu's optional setters
    (``set_get_device_stats_fn``, ``set_reset_peak_status_fn``,
    ``set_init_fn``, ``set_reset_fn``, ``set_memory_fraction_fn``), each
    taking a function address (e.g. from ``ctypes``).

    Raises:
        OSError: the library cannot be loaded.
        AttributeError: a function is not in the library.
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str) -> None:
        if not isinstance(path_to_so_file, (str, os.PathLike)):
            raise TypeError("NPUPluggableAllocator: path_to_so_file must be a str or path, got "
                            f"{type(path_to_so_file).__name__}")
        path = os.fspath(path_to_so_file)
        library = ctypes.CDLL(path)
        alloc_fn = _function_address(library, path, alloc_fn_name)
        free_fn = _function_address(library, path, free_fn_name)
        super().__init__(_C._npu_customAllocator(alloc_fn, free_fn))
        self._library = library  # keeps the .so loaded while the allocator exists


def change_current_allocator(allocator: _NPUAllocator) -> None:
    r"""Make ``allocator`` the allocator of every npu tensor from now on.

    Only possible before the first npu allocation of the process, and only
    once: raises ``RuntimeError`` ("Can't swap an already initialized
    allocator") otherwise. With a pluggable allocator current, memory
    statistics come from its ``get_device_stats`` function, and private pools
    (``use_mem_pool``, graph capture) are unavailable.

    Args:
        allocator (_NPUAllocator): e.g. an :class:`NPUPluggableAllocator`.
    """
    if not isinstance(allocator, _NPUAllocator) or allocator.allocator() is None:
        raise TypeError("change_current_allocator expects an NPUPluggableAllocator, got "
                        f"{type(allocator).__name__}")
    _C._npu_changeCurrentAllocator(allocator.allocator())


def _get_current_allocator() -> _NPUAllocator:
    r"""The allocator in use; ``allocator()`` is ``None`` for the caching allocator."""
    return _NPUAllocator(_C._npu_getAllocator())
