"""``torch.npu.amp.autocast`` and the deprecated ``custom_fwd`` / ``custom_bwd``."""

import functools
from typing import Any, Callable, Optional

import torch

__all__ = ["autocast", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast_mode.autocast):
    r"""``torch.autocast("npu", ...)``, with torch_npu's signature.

    Args:
        enabled: whether autocasting is on in the region.
        dtype: the lower-precision dtype (``torch.float16`` or ``torch.bfloat16``).
        cache_enabled: whether casts of leaf tensors are cached in the region.
    """

    def __init__(
        self,
        enabled: bool = True,
        dtype: torch.dtype = torch.float16,
        cache_enabled: bool = True,
    ) -> None:
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd: Optional[Callable] = None, *, cast_inputs: Optional[torch.dtype] = None):
    r"""``torch.amp.custom_fwd(..., device_type="npu")`` (torch_npu's deprecated spelling)."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable) -> Callable:
    r"""``torch.amp.custom_bwd(..., device_type="npu")`` (torch_npu's deprecated spelling)."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
