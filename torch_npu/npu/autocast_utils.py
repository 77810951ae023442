"""Autocast state of the npu device (``torch.npu.get_amp_supported_dtype`` & co.)."""

from typing import List

import torch

__all__ = [
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "is_autocast_enabled",
    "is_bf16_supported",
    "set_autocast_dtype",
    "set_autocast_enabled",
]


def is_bf16_supported(including_emulation: bool = False) -> bool:
    r"""True: the simulated device computes bfloat16 (as the CPU does)."""
    return True


def get_amp_supported_dtype() -> List[torch.dtype]:
    r"""The dtypes ``torch.autocast("npu", dtype=...)`` accepts."""
    if is_bf16_supported():
        return [torch.float16, torch.bfloat16, torch.float32]
    return [torch.float16, torch.float32]


def is_autocast_enabled() -> bool:
    r"""Whether autocast is on for npu in this thread."""
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enable: bool) -> None:
    r"""Turns autocast for npu on or off in this thread."""
    torch.set_autocast_enabled("npu", enable)


def get_autocast_dtype() -> torch.dtype:
    r"""The lower-precision dtype of npu autocast (``torch.float16`` by default)."""
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    r"""Sets the lower-precision dtype of npu autocast."""
    torch.set_autocast_dtype("npu", dtype)
