"""``torch.npu.aclnn``: torch_npu's switches of the aclnn operator library.

``allow_hf32`` is the convolution HF32 switch, the same one as
``torch.npu.conv.allow_hf32`` (Note [HF32 switches] in ``npu_config.py``);
``flags(allow_hf32=...)`` sets it for a ``with`` block. ``version()`` is
``None``: there is no aclnn library on the simulated NPU.
"""

import contextlib
import sys
import types
import warnings
from typing import Iterator, Optional, Tuple

from .. import npu_config

__all__ = ["allow_hf32", "flags", "set_flags", "version"]


def version() -> None:
    r"""The aclnn library's version: ``None``, since the simulated NPU has none (torch_npu's answer without one)."""
    warnings.warn("torch.npu.aclnn.version isn't implemented!", stacklevel=2)
    return None


def set_flags(_allow_hf32: Optional[bool] = None) -> Tuple[bool]:
    r"""Set the switches given (``None`` leaves one alone); returns the previous values."""
    previous = (npu_config._hf32["conv"],)
    if _allow_hf32 is not None:
        npu_config._set_hf32("conv", _allow_hf32)
    return previous


@contextlib.contextmanager
def flags(allow_hf32: bool = True) -> Iterator[None]:
    r"""Set ``allow_hf32`` for the ``with`` block; the previous value comes back after it."""
    previous = set_flags(allow_hf32)
    try:
        yield
    finally:
        set_flags(*previous)


class _AclnnModule(types.ModuleType):
    # A module whose allow_hf32 attribute reads and sets the shared switch.
    @property
    def allow_hf32(self) -> bool:
        return npu_config._hf32["conv"]

    @allow_hf32.setter
    def allow_hf32(self, value: bool) -> None:
        npu_config._set_hf32("conv", value)


sys.modules[__name__].__class__ = _AclnnModule
