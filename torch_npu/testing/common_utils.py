"""Small helpers used by :mod:`torch_npu.testing.testcase` (as in torch_npu).

Importing this module does not initialise the device.
"""

import itertools
import os
from typing import Any, Iterator, Tuple

import torch

__all__ = ["set_npu_device", "is_iterable", "iter_indices"]


def set_npu_device() -> str:
    r"""Select the device named by ``SET_NPU_DEVICE`` (default 0) and return ``'npu:N'``."""
    index = int(os.environ.get("SET_NPU_DEVICE", "0"))
    torch.npu.set_device(index)
    return f"npu:{index}"


def is_iterable(obj: Any) -> bool:
    r"""True if ``iter(obj)`` works."""
    try:
        iter(obj)
        return True
    except TypeError:
        return False


def iter_indices(tensor: torch.Tensor) -> Iterator[Tuple[int, ...]]:
    r"""Every index tuple of ``tensor`` (one element tuples for 0-d/1-d)."""
    if tensor.dim() == 0:
        return iter([()])
    return itertools.product(*(range(s) for s in tensor.size()))
