"""Device and stream functions of ``torch_npu.npu`` (``torch_npu.npu.utils``)."""

import threading
from typing import Any, List, NamedTuple, Optional, Union

import torch

from .. import _C
from .streams import Stream, _device_index

__all__ = [
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "get_device_name",
    "get_device_properties",
    "is_available",
    "is_initialized",
    "set_device",
    "set_stream",
    "stream",
    "synchronize",
]

_DeviceLike = Union[torch.device, str, int, None]
_initialized = False
_init_lock = threading.Lock()


def _lazy_init() -> None:
    """Initialise the runtime (raises its configuration error, if any)."""
    global _initialized
    if _initialized:
        return
    with _init_lock:
        _C._npu_init()
        _initialized = True


def _is_in_bad_fork() -> bool:
    return False


def is_initialized() -> bool:
    r"""True once the runtime has been initialised."""
    return _initialized


def is_available() -> bool:
    r"""True if at least one simulated NPU is available."""
    return device_count() > 0


def device_count() -> int:
    r"""Number of simulated NPUs (``NPU_SIM_DEVICE_COUNT``)."""
    return _C._npu_getDeviceCount()


def current_device() -> int:
    r"""Index of the calling thread's current npu device."""
    _lazy_init()
    return _C._npu_getDevice()


def _checked_index(device: _DeviceLike, optional: bool = True) -> int:
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int, type(None))):
        raise TypeError(f"Expected a torch.device, str, int or None, but got {type(device).__name__}")
    if isinstance(device, str) and ":" not in device and device != "npu":
        device = torch.device(device)
    index = _device_index(device)
    if index == -1:
        return current_device() if optional else -1
    return index


def set_device(device: _DeviceLike) -> None:
    r"""Set the calling thread's current npu device."""
    index = _checked_index(device)
    if index < 0:
        raise ValueError(f"Invalid device_index: {index}")
    _C._npu_setDevice(index)


def synchronize(device: _DeviceLike = None) -> None:
    r"""Wait until all work queued on every stream of ``device`` (current if ``None``) completed."""
    if isinstance(device, (torch.device, str)):
        d = torch.device(device) if isinstance(device, str) else device
        if d.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {d}")
    _lazy_init()
    _C._npu_synchronize(_checked_index(device))


class _DeviceProperties(NamedTuple):
    name: str
    total_memory: int
    multi_processor_count: int


def get_device_properties(device: _DeviceLike = None) -> _DeviceProperties:
    r"""Name, total memory (bytes) and core count of a device."""
    _lazy_init()
    name, total, cores = _C._npu_getDeviceProperties(_checked_index(device))
    return _DeviceProperties(name, total, cores)


def get_device_name(device: _DeviceLike = None) -> str:
    r"""Name of a device, e.g. ``'NPU-SIM-0'``."""
    return get_device_properties(device).name


class device:
    r"""Context manager that changes the current device.

    Args:
        device (torch.device or int): device to select; ``None`` or ``-1`` is a no-op.
    """

    def __init__(self, device: _DeviceLike) -> None:
        self.idx = _checked_index(device, optional=False)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx == -1:
            return
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            _C._npu_setDevice(self.idx)

    def __exit__(self, *args: Any) -> None:
        if self.idx != -1 and self.prev_idx != self.idx:
            _C._npu_setDevice(self.prev_idx)


class device_of(device):
    r"""Context manager that selects the device of a tensor (no-op for CPU tensors)."""

    def __init__(self, obj: torch.Tensor) -> None:
        idx = obj.get_device() if obj.device.type == "npu" else -1
        super().__init__(idx)


def current_stream(device: _DeviceLike = None) -> Stream:
    r"""The calling thread's current stream for ``device`` (current device if ``None``)."""
    _lazy_init()
    sid, idx, dtype = _C._npu_getCurrentStream(_checked_index(device))
    return Stream(stream_id=sid, device_index=idx, device_type=dtype)


def default_stream(device: _DeviceLike = None) -> Stream:
    r"""The default stream of ``device`` (current device if ``None``)."""
    _lazy_init()
    sid, idx, dtype = _C._npu_getDefaultStream(_checked_index(device))
    return Stream(stream_id=sid, device_index=idx, device_type=dtype)


def set_stream(stream: Optional[torch.Stream]) -> None:
    r"""Make ``stream`` current (switching the current device to its device). ``None``: no-op."""
    if stream is None:
        return
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"set_stream expects a torch_npu.npu.Stream, but got {type(stream).__name__}")
    _lazy_init()
    _C._npu_setStream(stream.stream_id, stream.device_index, stream.device_type)


class StreamContext:
    r"""Context manager that selects a stream (and its device).

    The saved state is kept per entry, so one ``StreamContext`` (or one stream)
    may be entered by several threads at once.

    Args:
        stream_ctx (Stream): the stream to select; ``None`` makes this a no-op.
    """

    def __init__(self, stream_ctx: Optional[torch.Stream]) -> None:
        self.stream = stream_ctx
        self._saved = threading.local()

    def __enter__(self) -> Optional[torch.Stream]:
        cur = self.stream
        if cur is None:
            return None
        stack = getattr(self._saved, "stack", None)
        if stack is None:
            stack = self._saved.stack = []
        prev_device = current_device()
        prev_on_target = current_stream(cur.device_index)
        prev_on_current = current_stream(prev_device) if prev_device != cur.device_index else None
        stack.append((prev_device, prev_on_target, prev_on_current))
        set_stream(cur)
        return cur

    def __exit__(self, *args: Any) -> None:
        if self.stream is None:
            return
        prev_device, prev_on_target, prev_on_current = self._saved.stack.pop()
        set_stream(prev_on_target)
        if prev_on_current is not None:
            set_stream(prev_on_current)
        _C._npu_setDevice(prev_device)


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    r"""Context manager selecting ``stream``; see :class:`StreamContext`."""
    return StreamContext(stream)
