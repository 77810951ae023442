r"""torch_npu's Python error codes: the suffix its exceptions carry.

torch_npu appends ``\n[ERROR] <time> (PID:<pid>, Device:<device>, RankID:<rank>)
ERR<submodule><code> <SUBMODULE> <meaning>`` to the messages of the exceptions
its Python code raises (``pta_error(ErrCode.VALUE)`` and friends), so that logs
of many ranks can be searched by code. Code written for torch_npu (its tests,
its optimizers) imports these names; they build the same suffix here.
``TORCH_NPU_COMPACT_ERROR_OUTPUT=1`` and interactive sessions drop it, as in
torch_npu.
"""

import os
import sys
import time
from enum import Enum

__all__ = ["ErrCode", "pta_error", "ops_error", "dist_error", "graph_error", "prof_error"]


class _SubModuleID(Enum):
    PTA = 0
    OPS = 1
    DIST = 2
    GRAPH = 3
    PROF = 4
    UNKNOWN = 99


class ErrCode(Enum):
    r"""torch_npu's error codes: ``(number, meaning)``."""

    SUCCESS = (0, "success")
    PARAM = (1, "invalid parameter")
    TYPE = (2, "invalid type")
    VALUE = (3, "invalid value")
    PTR = (4, "invalid pointer")
    INTERNAL = (5, "internal error")
    MEMORY = (6, "memory error")
    NOT_SUPPORT = (7, "feature not supported")
    NOT_FOUND = (8, "resource not found")
    UNAVAIL = (9, "resource unavailable")
    SYSCALL = (10, "system call failed")
    TIMEOUT = (11, "timeout error")
    PERMISSION = (12, "permission error")
    ACL = (100, "call acl api failed")
    HCCL = (200, "call hccl api failed")
    GE = (300, "call ge api failed")
    EXCEPT = (999, "applicaiton exception")  # torch_npu's spelling

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def msg(self) -> str:
        return self.value[1]


def _current_device_or_minus_one() -> int:
    # Never initialises the device: an error message must not start it.
    try:
        import torch_npu._C as C

        return C._npu_getDevice()
    except Exception:
        return -1


def _rank_or_minus_one() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank()
    except Exception:
        return -1


def _is_interactive() -> bool:
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


def _format_error_msg(submodule: _SubModuleID, error: ErrCode) -> str:
    # Read leniently: this runs while an error is being raised, and must not
    # replace it with a ValueError of its own (torch_npu's int() would).
    if os.getenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0").strip() not in ("", "0") or _is_interactive():
        return ""
    return (
        f"\n[ERROR] {time.strftime('%Y-%m-%d-%H:%M:%S', time.localtime())} "
        f"(PID:{os.getpid()}, Device:{_current_device_or_minus_one()}, "
        f"RankID:{_rank_or_minus_one()}) "
        f"ERR{submodule.value:0>2d}{error.code:0>3d} {submodule.name} {error.msg}"
    )


def pta_error(error: ErrCode) -> str:
    r"""The suffix of an error of torch_npu's framework (``ERR00xxx PTA``)."""
    return _format_error_msg(_SubModuleID.PTA, error)


def ops_error(error: ErrCode) -> str:
    r"""The suffix of an operator error (``ERR01xxx OPS``)."""
    return _format_error_msg(_SubModuleID.OPS, error)


def dist_error(error: ErrCode) -> str:
    r"""The suffix of a distributed error (``ERR02xxx DIST``)."""
    return _format_error_msg(_SubModuleID.DIST, error)


def graph_error(error: ErrCode) -> str:
    r"""The suffix of a graph error (``ERR03xxx GRAPH``)."""
    return _format_error_msg(_SubModuleID.GRAPH, error)


def prof_error(error: ErrCode) -> str:
    r"""The suffix of a profiler error (``ERR04xxx PROF``)."""
    return _format_error_msg(_SubModuleID.PROF, error)
