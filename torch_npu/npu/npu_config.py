"""Process-wide settings of ``torch_npu.npu`` (torch_npu's ``npu_config``):
device core limits, the op execution timeout, the compatible-implementation
switch and the HF32 switches.

What each one does on the simulated NPU is in docs/COMPATIBILITY.md
("Device and runtime settings").
"""

import os
from typing import Any, Callable, Dict

from .. import _C

__all__ = [
    "are_compatible_impl_enabled",
    "get_device_limit",
    "get_op_timeout_ms",
    "set_device_limit",
    "set_op_timeout_ms",
    "use_compatible_impl",
]

_UINT32_MAX = 2**32 - 1


def _check_device(device: Any) -> None:
    from .utils import _lazy_init, device_count

    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, but got {type(device).__name__}")
    count = device_count()
    if device < 0 or device >= count:
        raise AssertionError(f"Invalid device id: expected an int in [0, {count}), but got {device}")
    _lazy_init()


class _CallOnce:
    r"""A function that may succeed once per process (torch_npu's ``_call_once_class``).

    ``called`` turns true after the first successful call (torch_npu sets it
    before the call, so that a rejected argument also uses up the one call);
    tests may reset it.
    """

    def __init__(self, func: Callable[..., None]) -> None:
        self.func = func
        self.called = False
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.called:
            raise RuntimeError(
                f"Function '{self.func.__name__}' has already been called, You can only set this interface once."
            )
        self.func(*args, **kwargs)
        self.called = True


def _check_core_num(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"set_device_limit: {name} should be an int, could not be {type(value).__name__}")


@_CallOnce
def set_device_limit(device, cube_num=-1, vector_num=-1):  # type: (int, int, int) -> None
    r"""Limit the cores that kernels on ``device`` may use; once per process.

    The limit is the default of every stream of the device: a stream limited
    with :func:`set_stream_limit` keeps its own value for the kinds it sets.
    On the simulated NPU both kinds are the device's executor cores
    (``NPU_SIM_CORES``) and a limit caps the parallelism of each kernel
    (Note [Stream resource limits on the simulated NPU] in
    ``csrc/core/StreamLimits.h``).

    Args:
        device (int): the device index.
        cube_num (int): 1..cores of the device, or ``-1`` (default) to leave it unchanged.
        vector_num (int): 1..cores of the device, or ``-1`` (default) to leave it unchanged.

    Raises:
        TypeError: ``device`` (or a core number) is not an int.
        AssertionError: ``device`` is not a device index ("Invalid device id").
        RuntimeError: a core number out of range, or a second call.
    """
    _check_device(device)
    _check_core_num(cube_num, "cube_num")
    _check_core_num(vector_num, "vector_num")
    if cube_num != -1:
        _C._npu_set_device_res_limit(device, 0, cube_num)
    if vector_num != -1:
        _C._npu_set_device_res_limit(device, 1, vector_num)


def get_device_limit(device):  # type: (int) -> Dict[str, int]
    r"""The limits of ``device``: ``{"cube_core_num": c, "vector_core_num": v}``.

    A kind without a limit reports the device's core count.
    """
    _check_device(device)
    return {
        "cube_core_num": _C._npu_get_device_res_limit(device, 0),
        "vector_core_num": _C._npu_get_device_res_limit(device, 1),
    }


def set_op_timeout_ms(timeout):  # type: (int) -> None
    r"""Fail every op (device task) that runs longer than ``timeout`` milliseconds.

    A task that takes longer, its simulated delay (``NPU_SIM_TASK_DELAY_US``)
    included, is reported as a failure of its stream, once, by the stream's
    next synchronize or query (or the device's synchronize), and the work
    queued behind it on that stream is discarded, as for any failing op
    (Note [Op execution timeout] in ``csrc/npurt/README.md``). ``0`` turns
    the timeout off (the default). Applies to tasks that start after the call.

    Args:
        timeout (int): milliseconds, 0..2**32-1 (torch_npu's unsigned 32-bit value).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise TypeError(f"set_op_timeout_ms: timeout must be an int (milliseconds), but got {type(timeout).__name__}")
    if timeout < 0:
        # torch_npu's own words (it unpacks an unsigned int), then what to do.
        raise OverflowError(
            f"can't convert negative value to unsigned int: set_op_timeout_ms expects "
            f"milliseconds in [0, {_UINT32_MAX}] (0 = no timeout), but got {timeout}"
        )
    if timeout > _UINT32_MAX:
        raise ValueError(
            f"Overflow when unpacking long long: set_op_timeout_ms expects milliseconds in "
            f"[0, {_UINT32_MAX}], but got {timeout}"
        )
    from .utils import _lazy_init

    _lazy_init()
    _C._npu_set_op_timeout_ms(timeout)


def get_op_timeout_ms():  # type: () -> int
    r"""The op execution timeout set with :func:`set_op_timeout_ms`, 0 if none (not in torch_npu)."""
    from .utils import _lazy_init

    _lazy_init()
    return int(_C._npu_get_op_timeout_ms())


def _compatible_impl_from_env() -> bool:
    # TORCH_NPU_USE_COMPATIBLE_IMPL=1 turns the switch on at import, as in
    # torch_npu; a value other than 0 or 1 is a typo, not a silent "off".
    value = os.environ.get("TORCH_NPU_USE_COMPATIBLE_IMPL", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"TORCH_NPU_USE_COMPATIBLE_IMPL must be 0 or 1, but got {value!r}")
    return value == "1"


_compatible_impl = _compatible_impl_from_env()


def use_compatible_impl(is_enable):  # type: (bool) -> None
    r"""Ask for operator implementations that match PyTorch's exactly.

    torch_npu switches a few operators (``gelu``, ``matmul``, ``max_pool1d``,
    ``max_pool2d``) from Ascend kernels to ones that agree with PyTorch. On the
    simulated NPU every operator already runs PyTorch's own CPU kernel, so the
    results are PyTorch's either way: the switch is recorded and reported by
    :func:`are_compatible_impl_enabled`, and changes nothing else.
    """
    global _compatible_impl
    if not isinstance(is_enable, bool):
        raise TypeError(f"use_compatible_impl: is_enable must be a bool, but got {type(is_enable).__name__}")
    _compatible_impl = is_enable


def are_compatible_impl_enabled():  # type: () -> bool
    r"""Whether :func:`use_compatible_impl` (or ``TORCH_NPU_USE_COMPATIBLE_IMPL=1``) turned it on."""
    return _compatible_impl


# Note [HF32 switches]
# ~~~~~~~~~~~~~~~~~~~~
# torch_npu's ``torch.npu.matmul.allow_hf32`` (default False) and
# ``torch.npu.conv.allow_hf32`` (default True; also ``torch.npu.aclnn.
# allow_hf32``) *permit* Ascend's matmul and convolution kernels to compute
# float32 in HF32, a format with fewer mantissa bits, as CUDA's allow_tf32
# permits TF32. The simulated NPU runs PyTorch's CPU kernels, which compute
# float32 in full precision: that satisfies both settings, so the switches are
# kept, validated and read back, and results are the same either way (as
# CUDA's allow_tf32 is on a GPU without tensor cores).
_hf32 = {"matmul": False, "conv": True}


def _set_hf32(kind: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"allow_hf32 must be a bool, but got {type(value).__name__}")
    _hf32[kind] = value


class _HF32Switch:
    r"""``torch.npu.matmul`` / ``torch.npu.conv``: the ``allow_hf32`` switch of one kernel kind.

    See Note [HF32 switches]. Other attributes read as ``None`` and are
    ignored when set, as torch_npu's objects do.
    """

    def __init__(self, kind: str) -> None:
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str) -> Any:
        return _hf32[self._kind] if name == "allow_hf32" else None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "allow_hf32":
            _set_hf32(self._kind, value)

    def __repr__(self) -> str:
        return f"torch.npu.{self._kind}(allow_hf32={_hf32[self._kind]})"
