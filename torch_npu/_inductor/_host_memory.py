"""CPU tensors over npu memory, for code that computes npu data on the host.

See Note [Compiled npu graphs run as stream tasks] in ``_compile.py``.
"""

import ctypes

import torch

__all__ = ["host_alias"]


def host_alias(tensor: torch.Tensor) -> torch.Tensor:
    r"""A CPU tensor over the memory of npu ``tensor``, with its sizes, strides and
    offset; other tensors pass through unchanged.

    The simulated device's memory is host memory. The alias owns nothing: the
    caller keeps ``tensor`` alive while the alias is used, and reads or writes it
    only in the order of the stream that uses ``tensor`` (from a task on it).
    Thread-safe.
    """
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "npu":
        return tensor
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype)
    raw = (ctypes.c_byte * storage.nbytes()).from_address(storage.data_ptr())
    flat = torch.frombuffer(raw, dtype=torch.uint8).view(tensor.dtype)
    return flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
