"""Device and stream functions of ``torch_npu.npu`` (``torch_npu.npu.utils``)."""

import threading
from types import ModuleType
from typing import Any, Dict, List, NamedTuple, Optional, Union

import torch

from .. import _C
from ._platform import _is_gte_cann_version, get_cann_version, get_soc_version  # noqa: F401
from .streams import Stream, _device_index, _enter_stream, _exit_stream

__all__ = [
    "StreamContext",
    "can_device_access_peer",
    "current_blas_handle",
    "get_cann_version",
    "get_device_capability",
    "get_soc_version",
    "init",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "get_device_name",
    "get_device_properties",
    "get_external_stream_mode",
    "get_stream_limit",
    "get_sync_debug_mode",
    "host_sync_count",
    "host_sync_stats",
    "is_available",
    "is_current_stream_capturing",
    "is_initialized",
    "npurt",
    "reset_host_sync_stats",
    "reset_stream_limit",
    "set_device",
    "set_external_stream_mode",
    "set_stream",
    "set_stream_limit",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
    "utilization",
]

_DeviceLike = Union[torch.device, str, int, None]
_initialized = False
_init_lock = threading.Lock()


def _lazy_init() -> None:
    """Initialise the backend on first use (``torch.npu._lazy_init``).

    Called by the first tensor on an npu device (PyTorch's device lazy init),
    by the functions of this module, and (in C++) by the first stream or event
    use. Validates every environment variable the backend reads and raises
    ``RuntimeError`` naming the variable, its value and the accepted values:
    ``NPU_SIM_DEVICE_COUNT``, ``ASCEND_RT_VISIBLE_DEVICES``, ``NPU_SIM_CORES``, ``NPU_SIM_MEMORY_MB``,
    ``NPU_SIM_TASK_DELAY_US``, ``NPU_SIM_SOC_VERSION``, ``TASK_QUEUE_ENABLE``,
    ``ASCEND_LAUNCH_BLOCKING``, ``PER_STREAM_QUEUE`` and
    ``TORCH_NPU_EXTERNAL_STREAM_MODE``; a bad ``STREAMS_PER_DEVICE`` warns
    and uses 32, as torch_npu does. A failed initialisation raises again at
    the next use.
    """
    global _initialized
    if _initialized:
        return
    with _init_lock:
        _C._npu_init()
        _initialized = True


def _is_in_bad_fork() -> bool:
    r"""True in a process forked from one that had initialised the npu.

    Such a child cannot use the npu (its device threads stay in the parent);
    see Note [Fork] in csrc/core/NPUFunctions.h.
    """
    return bool(_C._npu_isInBadFork())


def is_initialized():  # type: () -> bool
    r"""True once the backend has been initialised (see :func:`_lazy_init`)."""
    return _initialized or _C._npu_isInitialized()


def is_available():  # type: () -> bool
    r"""True if at least one simulated NPU is available."""
    return device_count() > 0


def device_count():  # type: () -> int
    r"""Number of simulated NPUs the process sees.

    ``NPU_SIM_DEVICE_COUNT``, or the length of ``ASCEND_RT_VISIBLE_DEVICES``
    when set; 0 if that configuration is invalid (the first npu use then
    raises the reason).

    .. note:: As in torch_npu (and ``torch.cuda``), the count is not cached
        before the device is initialised: until then every call reads the
        environment again, so a process may still change
        ``ASCEND_RT_VISIBLE_DEVICES``; initialisation freezes it.
    """
    return _C._npu_probeDeviceCount()


def current_device():  # type: () -> int
    r"""Index of the calling thread's current npu device."""
    _lazy_init()
    return _C._npu_getDevice()


def utilization(device: _DeviceLike = None) -> int:
    r"""Percent (0-100) of the device's compute time spent running work over the last second.

    torch_npu's ``torch.npu.utilization`` (Ascend's cube/vector core
    utilization; ``torch.cuda.utilization`` on CUDA). On the simulated device
    it is the share of its executor cores' time spent running stream tasks,
    simulated delays included: one stream kept busy on a two-core device is
    50. A device index out of range raises ``AssertionError``, as torch_npu's.
    """
    _lazy_init()
    if isinstance(device, _DEVICE_CONTEXTS):
        device = device.idx
    index = _device_index(device) if device is not None else current_device()
    if index == -1:
        index = current_device()
    if index < 0 or index >= device_count():
        raise AssertionError(f"Invalid device id: {index}; expected a device index in [0, {device_count()}).")
    return _C._npu_getDeviceUtilizationRate(index)


def _checked_index(device: _DeviceLike, optional: bool = True) -> int:
    if isinstance(device, _DEVICE_CONTEXTS):
        # torch.npu.device(1) stands for device 1, as torch.cuda.device does for cuda.
        device = device.idx
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int, type(None))):
        raise TypeError(f"Expected a torch.device, str, int or None, but got {type(device).__name__}")
    if isinstance(device, str) and ":" not in device and device != "npu":
        device = torch.device(device)
    index = _device_index(device)
    if index == -1:
        return current_device() if optional else -1
    if index < -1 or index >= device_count():
        raise RuntimeError(f"Invalid device_index: {index}. Expected a device index in [0, {device_count()}) or -1.")
    return index


def set_device(device):  # type: (_DeviceLike) -> None
    r"""Set the calling thread's current npu device."""
    _C._npu_setDevice(_checked_index(device))


def synchronize(device=None):  # type: (_DeviceLike) -> None
    r"""Wait until all work queued on every stream of ``device`` has completed.

    Covers every stream of the device, external streams included, and reports
    the first failure of a task on the device. Releases the GIL while waiting.

    Args:
        device (torch.device or int, optional): the device; the current device
            if ``None`` (default). A non-npu device is a ``ValueError``.
    """
    if isinstance(device, (torch.device, str)):
        d = torch.device(device) if isinstance(device, str) else device
        if d.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {d}")
    _lazy_init()
    _C._npu_synchronize(_checked_index(device))


class _DeviceProperties(NamedTuple):
    r"""What ``get_device_properties`` returns (torch_npu's field names).

    ``cube_core_num`` and ``vector_core_num`` are the device's executor threads
    (``NPU_SIM_CORES``; the simulator has one kind of core), ``L2_cache_size``
    is 0 (no cache is simulated), ``uuid`` is stable per simulated device. The
    CUDA fields torch_npu keeps for compatibility (``major``, ``minor``,
    ``warp_size``, ...) are ``None``, as on torch_npu.
    """

    name: str
    total_memory: int
    multi_processor_count: int
    cube_core_num: int = 0
    vector_core_num: int = 0
    L2_cache_size: int = 0
    uuid: Optional[Any] = None
    major: Optional[int] = None
    minor: Optional[int] = None
    is_multi_gpu_board: Optional[bool] = None
    is_integrated: Optional[bool] = None
    max_threads_per_multi_processor: Optional[int] = None
    warp_size: Optional[int] = None
    regs_per_multiprocessor: Optional[int] = None
    gcnArchName: Optional[str] = None


def get_device_properties(device=None):  # type: (_DeviceLike) -> _DeviceProperties
    r"""Name, total memory (bytes), core counts and uuid of a device (see ``_DeviceProperties``)."""
    import uuid

    _lazy_init()
    name, total, cores = _C._npu_getDeviceProperties(_checked_index(device))
    return _DeviceProperties(
        name,
        total,
        cores,
        cube_core_num=cores,
        vector_core_num=cores,
        uuid=uuid.uuid5(uuid.NAMESPACE_OID, f"torch_npu-simulator/{name}"),
    )


def get_device_name(device=None):  # type: (_DeviceLike) -> str
    r"""Name of a device: ``'NPU-SIM-0'``, or the chip ``NPU_SIM_SOC_VERSION`` names (``'Ascend910B1'``)."""
    return get_device_properties(device).name


class device:
    r"""Context manager that changes the current device.

    Args:
        device (torch.device or int): device to select; ``None`` or ``-1`` is a no-op.
    """

    def __init__(self, device):  # type: (_DeviceLike) -> None
        self.idx = _checked_index(device, optional=False)
        self.prev_idx = -1

    def __enter__(self):  # type: () -> None
        if self.idx == -1:
            return
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            _C._npu_setDevice(self.idx)

    def __exit__(self, *args):  # type: (*Any) -> None
        if self.idx != -1 and self.prev_idx != self.idx:
            _C._npu_setDevice(self.prev_idx)


_DEVICE_CONTEXTS = (device,)  # for _checked_index, whose argument hides the class name


class device_of(device):
    r"""Context manager that selects the device of a tensor (no-op for CPU tensors)."""

    def __init__(self, obj):  # type: (torch.Tensor) -> None
        if not isinstance(obj, torch.Tensor):
            raise TypeError(f"device_of expects a torch.Tensor, but got {type(obj).__name__}")
        idx = obj.get_device() if obj.device.type == "npu" else -1
        super().__init__(idx)


def current_stream(device=None):  # type: (_DeviceLike) -> Stream
    r"""The calling thread's current :class:`Stream` for ``device``.

    The result is rebuilt from the stream's ``(stream_id, device_index,
    device_type)``: while an :class:`ExternalStream` is current it is a plain
    :class:`Stream` that compares equal to it and has the same ``npu_stream``.

    Args:
        device (torch.device or int, optional): the device; the current device
            if ``None`` (default).
    """
    if not _initialized:
        _lazy_init()
    return _C._npu_currentStreamObject(device)


def default_stream(device=None):  # type: (_DeviceLike) -> Stream
    r"""The default :class:`Stream` (``stream_id`` 0) of ``device`` (current device if ``None``)."""
    if not _initialized:
        _lazy_init()
    return _C._npu_defaultStreamObject(device)


def set_stream(stream):  # type: (Optional[torch.Stream]) -> None
    r"""Make ``stream`` the calling thread's current stream.

    The ``(stream_id, device_index, device_type)`` triple is validated, the
    current device switches to the stream's device if needed, then the stream
    becomes current. Prefer the :func:`stream` context manager.

    Args:
        stream (Stream): the stream; ``None`` is a no-op.
    """
    if stream is None:
        return
    if not _initialized:
        _lazy_init()
    _C._npu_setStreamObject(stream)


class StreamContext:
    r"""Context manager that selects a stream (and its device).

    Entering saves the current device and the current stream of the stream's
    device, then switches both; exiting restores them. The saved state is kept
    per thread (nested entries stacked), never on the stream or on this
    object, so one stream or one ``StreamContext`` may be entered by several
    threads at once.

    Calling :meth:`__exit__` without a matching :meth:`__enter__` on the same
    thread raises ``RuntimeError`` (``torch.cuda.StreamContext`` fails there
    with an unrelated ``AttributeError``).

    Args:
        stream_ctx (Stream): the stream to select; ``None`` makes this a no-op.
    """

    __slots__ = ("stream",)

    def __init__(self, stream_ctx):  # type: (Optional[torch.Stream]) -> None
        self.stream = stream_ctx

    def __enter__(self):  # type: () -> Optional[torch.Stream]
        cur = self.stream
        if cur is None:
            return None
        _enter_stream(self, cur)
        return cur

    def __exit__(self, *args):  # type: (*Any) -> None
        if self.stream is None:
            return
        _exit_stream(self, "StreamContext")


def stream(stream):  # type: (Optional[torch.Stream]) -> StreamContext
    r"""Context manager selecting ``stream``; see :class:`StreamContext`. ``None`` is a no-op."""
    return StreamContext(stream)


def is_current_stream_capturing():  # type: () -> bool
    r"""True if NPU graph capture is underway on the current stream, False otherwise.

    Does not initialise the device if it was never used.
    """
    return _C._npu_isCurrentStreamCapturing()


def _check_stream_arg(stream: Any, api: str) -> None:
    if stream is None:
        raise TypeError(f"{api}: stream cannot be None")
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"{api}: stream should be torch_npu.npu.Stream, could not be {type(stream).__name__}")


def _check_core_num(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"set_stream_limit: {name} should be an int, could not be {type(value).__name__}")


def set_stream_limit(stream, cube_num=-1, vector_num=-1):  # type: (torch.Stream, int, int) -> None
    r"""Limit the cores that kernels launched on ``stream`` may use.

    On the simulated NPU both kinds of core are the device's executor cores
    (``NPU_SIM_CORES``); a limit caps the parallelism of each kernel on the
    stream (the intra-op threads the op tasks use), see
    ``Note [Stream resource limits on the simulated NPU]`` in
    ``csrc/core/StreamLimits.h``.

    Args:
        stream (Stream): the stream.
        cube_num (int): 1..cores of the device, or ``-1`` (default) to leave it unchanged.
        vector_num (int): 1..cores of the device, or ``-1`` (default) to leave it unchanged.
    """
    _check_stream_arg(stream, "set_stream_limit")
    _check_core_num(cube_num, "cube_num")
    _check_core_num(vector_num, "vector_num")
    _lazy_init()
    if cube_num != -1:
        _C._npu_setStreamLimit(stream, 0, cube_num)
    if vector_num != -1:
        _C._npu_setStreamLimit(stream, 1, vector_num)


def reset_stream_limit(stream):  # type: (torch.Stream) -> None
    r"""Remove the limits set with :func:`set_stream_limit` on ``stream``."""
    _check_stream_arg(stream, "reset_stream_limit")
    _lazy_init()
    _C._npu_resetStreamLimit(stream)


def get_stream_limit(stream):  # type: (torch.Stream) -> Dict[str, int]
    r"""The limits of ``stream``: ``{"cube_core_num": c, "vector_core_num": v}``.

    An unlimited kind reports the device's core count.
    """
    _check_stream_arg(stream, "get_stream_limit")
    _lazy_init()
    return {
        "cube_core_num": _C._npu_getStreamLimit(stream, 0),
        "vector_core_num": _C._npu_getStreamLimit(stream, 1),
    }


def npurt():  # type: () -> ModuleType
    r"""The runtime API submodule ``torch_npu._C._npurt``.

    Functions (arguments are plain integers, e.g. ``ctypes.addressof`` of a
    ``c_void_p``; each returns the npurt status as an int, 0 = success; a 0
    address returns a non-zero status; the GIL is released):

    - ``npuStreamCreate(ptr_to_handle)``: create a stream on the current device
      and store its handle at ``ptr_to_handle``;
    - ``npuStreamDestroy(handle)``: destroy it;
    - ``npuHostRegister(ptr, size, flags)``: register host memory as pinned
      (Ascend's ``ACL_HOST_REG_*`` flags are accepted and ignored);
    - ``npuHostUnregister(ptr)``.
    """
    module = getattr(_C, "_npurt", None)
    if module is None:
        raise RuntimeError("torch_npu._C._npurt is unavailable in this build.")
    _lazy_init()
    return module


def set_external_stream_mode(mode):  # type: (str) -> None
    r"""Switch external-stream handling for all threads: ``'compat'`` or ``'full'``.

    ``compat`` (the default, or ``TORCH_NPU_EXTERNAL_STREAM_MODE=compat``) is
    torch_npu's behaviour; ``full`` makes the task queue track external streams,
    so synchronize, query, events and record_stream work on them. See
    docs/EXTERNAL_STREAMS.md.
    """
    if not isinstance(mode, str):
        raise TypeError(f"set_external_stream_mode expects 'compat' or 'full', but got {type(mode).__name__}")
    if mode not in ("compat", "full"):
        raise ValueError(f"set_external_stream_mode expects 'compat' or 'full', but got '{mode}'")
    _C._npu_setExternalStreamMode(mode)


def get_external_stream_mode():  # type: () -> str
    r"""The current external-stream mode, ``'compat'`` or ``'full'``."""
    return _C._npu_getExternalStreamMode()


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: Union[int, str]) -> None:
    r"""Sets the debug mode for synchronizing npu operations.

    A synchronizing operation is one where the host waits for the device on
    behalf of an op: a host read (``item()``, ``tolist()``, a blocking copy
    to or from the host) or an op whose output shape depends on the data
    (``nonzero``, ``unique``, ``masked_select``, ...). Explicit
    synchronizes (:func:`synchronize`, ``Stream.synchronize()``) are not
    reported. See docs/ARCHITECTURE.md, "Host syncs".

    Args:
        debug_mode (str or int): ``"default"`` or 0: count only;
            ``"warn"`` or 1: warn on every synchronizing operation;
            ``"error"`` or 2: raise ``RuntimeError`` before the operation
            queues anything.
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                f"got {debug_mode!r}"
            )
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError(
            f"debug_mode must be an int or a str, got {type(debug_mode).__name__}"
        )
    _C._npu_set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    r"""Returns the current sync debug mode: 0 (default), 1 (warn) or 2 (error)."""
    return int(_C._npu_get_sync_debug_mode())


def host_sync_count() -> int:
    r"""Number of host syncs the op path made since start or the last reset.

    Counts whatever the sync debug mode is; see :func:`set_sync_debug_mode`
    for what counts as a host sync.
    """
    return int(_C._npu_hostSyncStats()[0])


def host_sync_stats() -> Dict[str, int]:
    r"""Host syncs of the op path per op name, e.g. ``{"aten::nonzero": 2}``.

    Blocking copies appear as ``"aten::copy_ (npu to cpu)"`` and
    ``"aten::copy_ (cpu to npu)"``, host reads of one value as
    ``"aten::_local_scalar_dense"``.
    """
    return dict(_C._npu_hostSyncStats()[1])


def reset_host_sync_stats() -> None:
    r"""Resets the counts of :func:`host_sync_count` and :func:`host_sync_stats`."""
    _C._npu_resetHostSyncStats()


def init() -> None:
    r"""Initialise the npu backend now (``torch_npu.npu.init``).

    Ordinary code never needs this: every npu function and the first npu
    tensor initialise the backend on demand. Does nothing if the backend is
    already initialised; raises ``RuntimeError`` naming the variable if the
    configuration is invalid (see :func:`_lazy_init`).
    """
    _lazy_init()


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    r"""The device index of ``device`` (a ``torch.device``, str, int or ``None``).

    An int is returned as is. ``torch.device('npu')`` without an index, and
    ``None``, give the current device if ``optional`` is true. A cpu device is
    accepted (giving ``-1``) only with ``allow_cpu``; any other device type is
    a ``ValueError`` naming the device.
    """
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu:
            if device.type not in ("npu", "cpu"):
                raise ValueError(f"Expected a npu or cpu device, but got: {device}")
        elif device.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {device}")
    if isinstance(device, globals()["device"]):
        return device.idx
    from torch._utils import _get_device_index as _torch_get_device_index

    return _torch_get_device_index(device, optional, allow_cpu)


_cached_capability: Optional[Any] = None
_cached_capability_env: Optional[str] = None


def get_device_capability(device: _DeviceLike = None) -> Optional[Any]:
    r"""``(major, minor)`` from ``TORCH_NPU_DEVICE_CAPABILITY`` (``"8.0"``), else ``None``.

    As in torch_npu, the value only exists for code written for CUDA and says
    nothing about the device; ``device`` is ignored. Warns every call; an
    unset or malformed variable warns and returns ``None``.
    """
    import os
    import re
    import warnings

    global _cached_capability, _cached_capability_env
    env = os.getenv("TORCH_NPU_DEVICE_CAPABILITY")
    note = (
        "The return value of get_device_capability is only for compatibility with PyTorch "
        "and does not represent the actual capability of the NPU device."
    )
    if not env:
        warnings.warn(
            f"You can set the device capability via the environment variable TORCH_NPU_DEVICE_CAPABILITY. {note}"
        )
        return None
    if _cached_capability_env == env and _cached_capability is not None:
        return _cached_capability
    match = re.match(r"^(\d+)\.(\d+)$", env)
    if not match:
        warnings.warn(
            "torch.npu.get_device_capability can't parse TORCH_NPU_DEVICE_CAPABILITY environment variable: "
            f"{env}. Expected format is 'major.minor' where major and minor are non-negative integers "
            "(e.g., '8.0')."
        )
        return None
    warnings.warn(note)
    _cached_capability = (int(match.group(1)), int(match.group(2)))
    _cached_capability_env = env
    return _cached_capability


def can_device_access_peer(device_id: _DeviceLike, peer_device_id: _DeviceLike) -> bool:
    r"""True if ``device_id`` can access ``peer_device_id``'s memory.

    Simulated devices share the host's memory, so any two distinct valid
    devices can; a device is not its own peer (as with CUDA). An index out of
    range raises ``AssertionError`` ("Invalid device id"), as torch_npu does.
    """
    d = _get_device_index(device_id, optional=True)
    p = _get_device_index(peer_device_id, optional=True)
    if d < 0 or d >= device_count():
        raise AssertionError(f"Invalid device id: {d}")
    if p < 0 or p >= device_count():
        raise AssertionError(f"Invalid peer device id: {p}")
    return d != p


def current_blas_handle() -> None:
    r"""``None`` with a warning: the NPU has no BLAS handle (as torch_npu)."""
    import warnings

    warnings.warn("NPU does not use blas handle.")
    return None


def _sleep(cycles: int) -> None:
    r"""Queue a kernel that keeps the current stream busy for ``cycles`` cycles.

    One cycle is one nanosecond on the simulator (Note [Sleep cycles] in
    csrc/python/Module.cpp), so ``torch_npu.testing.common_utils.get_cycles_per_ms()``
    measures about 1e6. Returns at once; later work on the stream waits.

    Args:
        cycles (int): a non-negative number of cycles.
    """
    if isinstance(cycles, bool) or not isinstance(cycles, int):
        raise TypeError(f"_sleep expects an int number of cycles, but got {type(cycles).__name__}")
    _lazy_init()
    _C._npu_sleep(cycles)
