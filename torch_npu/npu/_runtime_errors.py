"""Runtime status codes as Python errors: ``torch_npu.npu.check_error`` and
``NpuError``, the npu counterparts of ``torch.cuda.check_error`` and
``torch.cuda.CudaError``.

torch_npu has neither; they are here so that code written against torch.cuda's
API (and torch_npu's ``test/test_npu.py``) can check the statuses that
``torch_npu.npu.npurt()``'s functions return.
"""

from .. import _C

__all__ = ["NpuError", "check_error"]


class NpuError(RuntimeError):
    r"""A failed runtime call: the status's description, then the status in parentheses.

    Args:
        code (int): the runtime status (``0`` is success; see ``npurt.h``).
    """

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"{_C._npurt.npuGetErrorString(code)} ({code})")


def check_error(res: int) -> None:
    r"""Raise :class:`NpuError` if ``res``, the status of a runtime call, is not success.

    Args:
        res (int): a status returned by a function of :func:`torch_npu.npu.npurt`.

    Raises:
        TypeError: ``res`` is not an int.
        NpuError: ``res`` is not ``0`` (success).
    """
    if isinstance(res, bool) or not isinstance(res, int):
        raise TypeError(f"check_error expects the int status of a runtime call, but got {type(res).__name__}")
    if res != _C._npurt.npuSuccess:
        raise NpuError(res)
