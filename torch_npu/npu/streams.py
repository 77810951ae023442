"""Streams and events of the simulated NPU (``torch_npu.npu.streams``)."""

import ctypes
from typing import Any, Optional, Union

import torch

from .. import _C

__all__ = ["Stream", "Event"]

_DeviceLike = Union[torch.device, str, int, None]


def _device_index(device: _DeviceLike) -> int:
    """Index of an npu device given as torch.device, 'npu:N', int or None (current)."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if not isinstance(device, torch.device):
        raise TypeError(f"Expected a torch.device, str or int, but got {type(device).__name__}")
    if device.type != "npu":
        raise ValueError(f"Expected a npu device, but got: {device}")
    return -1 if device.index is None else device.index


class Stream(torch.Stream):
    r"""Wrapper around a stream of the simulated NPU.

    A stream is an in-order queue of work on one device. Work queued on
    different streams may run concurrently.

    Args:
        device (torch.device or int, optional): the device of the stream; the
            current device if ``None``.
        priority (int, optional): ``-1`` (high) or ``0`` (normal, default).
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if {"stream_id", "device_index", "device_type"} & kwargs.keys():
            triple = _C._npu_validateStream(
                kwargs.get("stream_id", 0), kwargs.get("device_index", 0), kwargs.get("device_type", 0)
            )
        else:
            triple = _C._npu_getStreamFromPool(priority, _device_index(device))
        return super().__new__(cls, stream_id=triple[0], device_index=triple[1], device_type=triple[2])

    def _triple(self) -> tuple:
        return (self.stream_id, self.device_index, self.device_type)

    def wait_event(self, event: "Event") -> None:
        r"""Make all future work on this stream wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        r"""Make all future work on this stream wait for the work queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        r"""Record ``event`` (a new :class:`Event` if ``None``) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        r"""True if all work queued on this stream has completed."""
        return _C._npu_streamQuery(*self._triple())

    def synchronize(self) -> None:
        r"""Wait until all work queued on this stream has completed."""
        _C._npu_streamSynchronize(*self._triple())

    @property
    def npu_stream(self) -> int:
        r"""The runtime handle as an int. Reading it drains the task queue first."""
        return _C._npu_streamHandle(*self._triple())

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.npu_stream)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, torch.Stream):
            return super().__eq__(other)
        return False

    def __hash__(self) -> int:
        return hash((self.npu_stream, self.device))

    def __repr__(self) -> str:
        return f"<torch_npu.npu.Stream device={self.device} npu_stream={self.npu_stream:#x}>"


class Event(torch.Event):
    r"""Wrapper around an event of the simulated NPU.

    The runtime event is created lazily, on the first record, on the device
    of the recording stream. An event never recorded queries ``True``.

    Args:
        enable_timing (bool, optional): whether the event measures time.
        blocking (bool, optional): accepted for compatibility.
        interprocess (bool, optional): accepted for compatibility.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> "Event":
        return super().__new__(cls, device="npu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Record the event on ``stream`` (the current stream if ``None``)."""
        if stream is None:
            from .utils import current_stream

            stream = current_stream()
        super().record(stream)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Make future work on ``stream`` (current if ``None``) wait for this event."""
        if stream is None:
            from .utils import current_stream

            stream = current_stream()
        super().wait(stream)
