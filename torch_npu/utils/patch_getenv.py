"""Log every environment variable the program reads, once (torch_npu's ``patch_getenv``).

Importing this module (``import torch_npu`` does, first thing) replaces
``os.getenv`` and ``os.environ.get`` with versions that, the first time a set,
non-empty variable is read, log ``get env NAME = value`` at INFO on the
``torch_npu.env`` logger. ``TORCH_NPU_LOGS=env`` shows those lines (through
torch._logging's handler, on stderr). Reads of unset or empty variables, and
reads by other means (``os.environ[...]``, C++ ``getenv``), are not logged.
"""

import logging
import os
from typing import Optional, TypeVar

__all__: list[str] = []

_T = TypeVar("_T")

_seen: set[str] = set()

_orig_getenv = os.getenv
_orig_environ_get = os.environ.get
loggerEnv = logging.getLogger("torch_npu.env")


def _log_once(key: str, val: str) -> None:
    if key in _seen:
        return
    _seen.add(key)
    loggerEnv.info("get env %s = %s", key, val)


def _patched_getenv(key: str, default: Optional[_T] = None) -> "str | _T | None":
    val = _orig_getenv(key, default)
    if isinstance(val, str) and val != "" and key in os.environ:
        _log_once(key, val)
    return val


def _patched_environ_get(key: str, default: Optional[_T] = None) -> "str | _T | None":
    val = _orig_environ_get(key, default)
    if isinstance(val, str) and val != "" and key in os.environ:
        _log_once(key, val)
    return val


if not getattr(os.getenv, "_torch_npu_patched", False):
    _patched_getenv._torch_npu_patched = True  # type: ignore[attr-defined]
    os.getenv = _patched_getenv
    os.environ.get = _patched_environ_get  # type: ignore[method-assign]
