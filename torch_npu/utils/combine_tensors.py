r"""Tensors combined into one buffer: torch_npu's ``npu_combine_tensors`` and its helpers.

``npu_combine_tensors(tensors)`` allocates one contiguous npu tensor and moves
the *storage* of every tensor into a slice of it, so that an op on the buffer
is an op on all of them (the fused optimizers of ``torch_npu.optim`` update
every parameter with a handful of ops). The tensors keep their identity,
shape and values; every tensor sharing a storage with them follows. How a
storage is moved, who owns the memory afterwards and when the call waits for
the device: Note [Storages moved into a combined buffer] in
``csrc/core/NPUChangeDataPtr.h``. Everything here is queued on the current
stream; nothing waits for the device unless a tensor's memory is not the
current stream's (for instance a tensor combined once already).
"""

from typing import Optional, Sequence

import torch

from .. import _C
from ._error_code import ErrCode, pta_error

__all__ = [
    "npu_combine_tensors",
    "get_part_combined_tensor",
    "is_combined_tensor_valid",
    "get_storage_size",
    "npu_change_data_ptr",
]


def get_storage_size(tensor: torch.Tensor) -> int:
    r"""The number of elements (of ``tensor``'s dtype) its storage holds.

    torch_npu's ``torch_npu.get_storage_size``. Every npu format is ND on the
    simulated device, so this is the storage's size in bytes divided by the
    element size; it may exceed ``tensor.numel()`` for a view.
    """
    return _C._npu_storageSize(tensor)


def npu_change_data_ptr(dst: torch.Tensor, src: torch.Tensor, index: int) -> int:
    r"""Point ``dst``'s storage at element ``index`` of ``src``'s storage.

    torch_npu's ``torch_npu.npu_change_data_ptr``. ``dst``'s old memory is
    freed and its contents are lost; ``dst``'s storage keeps its size and now
    reads and writes ``src``'s memory. ``index`` counts elements from the start
    of ``src``'s storage. Both must be npu tensors of the same device and of
    dtype float32, float16 or bfloat16.

    .. note:: Unlike torch_npu, ``dst``'s storage keeps ``src``'s memory alive.

    Returns:
        0, as torch_npu.
    """
    _C._npu_changeDataPtr(dst, src, index)
    return 0


def _check_combinable(tensors: Sequence[torch.Tensor]) -> None:
    dtype = tensors[0].dtype
    device = tensors[0].device
    for tensor in tensors:
        if tensor.dtype != dtype:
            raise RuntimeError("Tensors to combine must have the same dtype." + pta_error(ErrCode.TYPE))
        if tensor.device.type != "npu":
            raise RuntimeError(
                f"Tensors to combine must be on NPU, got {tensor.device.type}." + pta_error(ErrCode.VALUE)
            )
        if tensor.device != device:
            raise RuntimeError(
                f"Tensors to combine must be on one NPU, got {device} and {tensor.device}."
                + pta_error(ErrCode.VALUE)
            )
        if not tensor.is_contiguous():
            raise RuntimeError("Tensors to combine must be contiguous." + pta_error(ErrCode.VALUE))


def npu_combine_tensors(list_of_tensor: Sequence[torch.Tensor], require_copy_value: bool = True) -> Optional[torch.Tensor]:
    r"""Move the storages of ``list_of_tensor`` into one new contiguous npu tensor.

    The tensors' storages are laid out one after the other, in list order,
    each taking ``get_storage_size(t)`` elements, and keep their values when
    ``require_copy_value`` (else they read zeros).

    Args:
        list_of_tensor: contiguous npu tensors of one dtype (float32, float16
            or bfloat16) and one device.
        require_copy_value: copy the tensors' values into the buffer.

    Returns:
        The 1-D buffer, or ``None`` for an empty list or if the storages hold
        no elements.
    """
    if len(list_of_tensor) == 0:
        return None
    if any(t is None for t in list_of_tensor):
        raise RuntimeError("Tensors to combine must not have `None`." + pta_error(ErrCode.PARAM))
    _check_combinable(list_of_tensor)
    sizes = [get_storage_size(t) for t in list_of_tensor]
    total_numel = sum(sizes)
    if total_numel == 0:
        return None

    first = list_of_tensor[0]
    factory = torch.empty if require_copy_value else torch.zeros
    combined = factory(total_numel, dtype=first.dtype, device=first.device)
    offset = 0
    for tensor, size in zip(list_of_tensor, sizes):
        if require_copy_value and size > 0:
            # The whole old storage, queued before the move frees it.
            whole = tensor.new_empty(0).set_(tensor.untyped_storage(), 0, (size,), (1,))
            combined.narrow(0, offset, size).copy_(whole)
        _C._npu_changeDataPtr(tensor, combined, offset)
        offset += size
    return combined


def get_part_combined_tensor(combined_tensor: Optional[torch.Tensor], index: int, size: int) -> Optional[torch.Tensor]:
    r"""A 1-D tensor of ``size`` elements whose storage is ``combined_tensor``'s from ``index``.

    Returns ``None`` if ``combined_tensor`` is ``None`` or ``size`` is 0.
    """
    if combined_tensor is None or size == 0:
        return None
    combined_size = get_storage_size(combined_tensor)
    if index + size > combined_size:
        raise RuntimeError(
            f"(index + size) ({index + size}) > torch_npu.get_storage_size(combined_tensor) ({combined_size})"
            + pta_error(ErrCode.VALUE)
        )
    part = torch.empty(size, dtype=combined_tensor.dtype, device=combined_tensor.device)
    _C._npu_changeDataPtr(part, combined_tensor, index)
    return part


def is_combined_tensor_valid(combined_tensor: Optional[torch.Tensor], list_of_tensor: Sequence[Optional[torch.Tensor]]) -> bool:
    r"""Whether every tensor of ``list_of_tensor`` is contiguous and starts inside ``combined_tensor``."""
    if len(list_of_tensor) == 0:
        return True
    if combined_tensor is None:
        return False
    start = combined_tensor.data_ptr()
    end = start + get_storage_size(combined_tensor) * combined_tensor.element_size()
    return all(t is not None and start <= t.data_ptr() < end and t.is_contiguous() for t in list_of_tensor)
