"""``torch_npu.npu._backends``: torch_npu's backend switches of ``torch.npu``.

- the scaled-dot-product-attention switches (``enable_flash_sdp`` & co.,
  ``sdp_kernel``): PyTorch's process-wide flags, which CUDA reads too. No
  npu kernel reads them: ``scaled_dot_product_attention`` on npu runs
  PyTorch's math implementation whatever they say, and each call warns so,
  with torch_npu's words (its device operators do not read them either);
- ``preferred_linalg_library``: no library to choose on npu (linear algebra
  runs PyTorch's CPU kernels); answers ``Default`` with torch_npu's warning;
- :func:`get_soc_version`, where torch_npu defines it (``from
  torch_npu.npu._backends import get_soc_version``); it is
  :func:`torch_npu.npu._platform.get_soc_version`.
"""

import contextlib
import warnings
from typing import Iterator, Union

import torch

from ._platform import get_soc_version

__all__ = [
    "enable_flash_sdp",
    "enable_math_sdp",
    "enable_mem_efficient_sdp",
    "flash_sdp_enabled",
    "get_soc_version",
    "math_sdp_enabled",
    "mem_efficient_sdp_enabled",
    "preferred_linalg_library",
    "sdp_kernel",
]


def _warn_only_flag(kind: str) -> None:
    warnings.warn(
        f"Currently, the device operator does not support {kind} sdp and only sets the global variable!",
        stacklevel=3,
    )


def _check_bool(name: str, enabled: object) -> None:
    if not isinstance(enabled, bool):
        raise TypeError(f"{name} must be a bool, but got {type(enabled).__name__}")


def flash_sdp_enabled() -> bool:
    r"""Whether PyTorch's flash scaled-dot-product-attention flag is set (no npu kernel reads it)."""
    _warn_only_flag("flash")
    return torch._C._get_flash_sdp_enabled()


def enable_flash_sdp(enabled: bool) -> None:
    r"""Set PyTorch's flash scaled-dot-product-attention flag (no npu kernel reads it)."""
    _check_bool("enable_flash_sdp: enabled", enabled)
    _warn_only_flag("flash")
    torch._C._set_sdp_use_flash(enabled)


def mem_efficient_sdp_enabled() -> bool:
    r"""Whether PyTorch's memory-efficient attention flag is set (no npu kernel reads it)."""
    _warn_only_flag("mem_efficient")
    return torch._C._get_mem_efficient_sdp_enabled()


def enable_mem_efficient_sdp(enabled: bool) -> None:
    r"""Set PyTorch's memory-efficient attention flag (no npu kernel reads it)."""
    _check_bool("enable_mem_efficient_sdp: enabled", enabled)
    _warn_only_flag("mem_efficient")
    torch._C._set_sdp_use_mem_efficient(enabled)


def math_sdp_enabled() -> bool:
    r"""Whether PyTorch's math attention flag is set (npu uses the math implementation regardless)."""
    _warn_only_flag("math")
    return torch._C._get_math_sdp_enabled()


def enable_math_sdp(enabled: bool) -> None:
    r"""Set PyTorch's math attention flag (npu uses the math implementation regardless)."""
    _check_bool("enable_math_sdp: enabled", enabled)
    _warn_only_flag("math")
    torch._C._set_sdp_use_math(enabled)


def _set_sdp_flags(flash: bool, mem_efficient: bool, math: bool) -> None:
    torch._C._set_sdp_use_flash(flash)
    torch._C._set_sdp_use_mem_efficient(mem_efficient)
    torch._C._set_sdp_use_math(math)


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True) -> Iterator[dict]:
    r"""Set the three attention flags for the ``with`` block; the previous values come back after it."""
    for name, value in (("enable_flash", enable_flash), ("enable_math", enable_math),
                        ("enable_mem_efficient", enable_mem_efficient)):
        _check_bool(f"sdp_kernel: {name}", value)
    _warn_only_flag("flash, math, mem_efficient")
    previous = (torch._C._get_flash_sdp_enabled(), torch._C._get_mem_efficient_sdp_enabled(),
                torch._C._get_math_sdp_enabled())
    try:
        _set_sdp_flags(enable_flash, enable_mem_efficient, enable_math)
        yield {}
    finally:
        _set_sdp_flags(*previous)


def preferred_linalg_library(
    backend: Union[None, str, torch._C._LinalgBackend] = None,
) -> torch._C._LinalgBackend:
    r"""torch.cuda's linear-algebra library choice: npu has none to choose.

    Linear algebra on npu runs PyTorch's CPU kernels, so any ``backend`` is
    accepted and ignored, and the answer is ``torch._C._LinalgBackend.Default``
    (torch_npu's answer, and its warning).
    """
    warnings.warn("torch.npu.preferred_linalg_library isn't implemented!", stacklevel=2)
    return torch._C._LinalgBackend.Default
