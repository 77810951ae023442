"""The bridge from ``torch._logging`` to torch_npu's C++ loggers (torch_npu's
``torch_npu._logging._internal``)."""

import functools
import os
from typing import Any, Callable

import torch._logging._internal

from torch_npu import _C

__all__: list[str] = []

#: torch_npu's log names that name something this backend has, and the
#: qualified logger each one enables. ``acl`` is accepted but has no emitter:
#: the framework calls the runtime (npurt) directly, not ACL (docs/LOGGING.md).
_NPU_LOGS = {
    "memory": "torch_npu.memory",
    "dispatch": "torch_npu.dispatch",
    "dispatch_time": "torch_npu.dispatch.time",
    "env": "torch_npu.env",
    "acl": "torch_npu.acl",
    "aclgraph": "torch_npu.npugraph",
    "npugraph": "torch_npu.npugraph",
}


#: torch_npu's log names of features this backend does not have, and why:
#: naming one in TORCH_NPU_LOGS raises a ValueError that says so.
_ABSENT_NPU_LOGS = {
    "silent": "silent data corruption checks (torch_npu.silent_check), a feature of Ascend hardware",
    "recovery": "fault recovery of Ascend devices (torch_npu.recovery)",
    "op_plugin": "op-plugin's aclnn kernels; ops on the simulated NPU run PyTorch's CPU kernels "
    "(their path is logged by 'dispatch')",
    "shmem": "NPU symmetric memory (torch_npu.symmetric_memory)",
}


def _check_no_absent_logs(setting: str) -> None:
    """Raise ValueError if ``setting`` (TORCH_NPU_LOGS) names a log of an absent feature."""
    for item in setting.split(","):
        name = item.strip().lstrip("+-")
        if name in _ABSENT_NPU_LOGS:
            raise ValueError(
                f"TORCH_NPU_LOGS={setting!r} names {name!r}, torch_npu's log of "
                f"{_ABSENT_NPU_LOGS[name]}, which this backend does not have. Remove it; the "
                f"torch_npu logs available here are: {', '.join(_NPU_LOGS)}."
            )


def _log_levels() -> dict[str, int]:
    """torch._logging's current {qualified logger name: level} table."""
    return dict(torch._logging._internal.log_state.log_qname_to_level)


def _set_logs() -> None:
    """Pass the settings of ``torch._logging.set_logs`` on to the C++ loggers.

    .. note:: ``TORCH_LOGS`` or ``TORCH_NPU_LOGS``, when set, take precedence
        over ``set_logs`` (as in torch._logging): then this does nothing.
    """
    if os.environ.get("TORCH_LOGS") is not None or os.environ.get("TORCH_NPU_LOGS") is not None:
        return
    _C._logging._LogContext.GetInstance().setLogs(_log_levels())


def _trigger_set_logs_decorator(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (``torch._logging.set_logs``) followed by :func:`_set_logs`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        _set_logs()
        return result

    wrapper._torch_npu_patched = True  # type: ignore[attr-defined]
    return wrapper


def _logging_patch() -> None:
    """Make ``torch._logging.set_logs`` set the C++ loggers' levels too (once)."""
    if not getattr(torch._logging.set_logs, "_torch_npu_patched", False):
        torch._logging.set_logs = _trigger_set_logs_decorator(torch._logging.set_logs)


def _add_logging_module() -> None:
    """Register torch_npu's log names with torch._logging."""
    for name, qname in _NPU_LOGS.items():
        torch._logging._internal.register_log(name, qname)


def _update_log_state_from_env() -> None:
    """Apply ``TORCH_NPU_LOGS`` (or ``TORCH_LOGS``) to Python's and the C++ loggers.

    ``TORCH_NPU_LOGS`` is parsed by torch._logging exactly as ``TORCH_LOGS``
    is, once torch_npu's names are registered (``TORCH_LOGS`` itself is parsed
    by ``import torch``, before they are, so it cannot name them). As in
    torch_npu, ``TORCH_NPU_LOGS`` then becomes torch._logging's variable, and
    ``set_logs`` calls are ignored with torch's warning.
    """
    npu_setting = os.environ.get("TORCH_NPU_LOGS")
    if npu_setting is not None:
        _check_no_absent_logs(npu_setting)
        torch._logging._internal.LOG_ENV_VAR = "TORCH_NPU_LOGS"
        torch._logging._internal._init_logs()
        _C._logging._LogContext.GetInstance().setLogs(_log_levels())
    elif os.environ.get("TORCH_LOGS") is not None:
        _C._logging._LogContext.GetInstance().setLogs(_log_levels())


def _init() -> None:
    """Set up torch_npu's logging; ``import torch_npu`` calls this once."""
    _logging_patch()
    _add_logging_module()
    _update_log_state_from_env()
