"""Multi-device helpers of torch_npu's test suite (``torch_npu.testing.common_distributed``).

Importing this module does not initialise the device.
"""

import functools
import unittest
from typing import Any, Callable

import torch

__all__ = ["skipIfUnsupportMultiNPU"]


def skipIfUnsupportMultiNPU(npu_number_needed: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    r"""Decorator: skip a test unless at least ``npu_number_needed`` npus are visible.

    The skip reason is torch_npu's ("Multi-NPU 4 condition not satisfied"); on
    the simulator ``NPU_SIM_DEVICE_COUNT`` sets how many devices there are.
    """
    if isinstance(npu_number_needed, bool) or not isinstance(npu_number_needed, int):
        raise TypeError(
            f"skipIfUnsupportMultiNPU expects an int device count, but got {npu_number_needed!r}"
        )

    def skip_dec(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not torch.npu.is_available() or torch.npu.device_count() < npu_number_needed:
                raise unittest.SkipTest(f"Multi-NPU {npu_number_needed} condition not satisfied")
            return func(self, *args, **kwargs)

        return wrapper

    return skip_dec
