"""TorchDynamo's and Inductor's device interface for npu (torch_npu's ``NpuInterface``).

``torch._dynamo.device_interface`` keeps one :class:`DeviceInterface` per device
type; Dynamo and Inductor reach a device's streams, events and properties only
through it (``get_interface_for_device("npu")``). This is the npu one, modelled
on PyTorch's ``CudaInterface``; :func:`torch_npu.utils._dynamo._dynamo_register_interface_for_device`
registers it. Importing this module imports ``torch._dynamo``.
"""

from typing import Any

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    caching_worker_device_properties,
)

from .. import _C
from .. import npu as _npu
from ..npu.streams import Event, Stream

__all__ = ["NpuInterface"]


def _device_index(device: torch.types.Device) -> int:
    """Index of ``device`` (int, 'npu:N', torch.device or None = current)."""
    if device is None:
        return NpuInterface.Worker.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(
                f"Expected an npu device, but got {device}. Pass an npu device "
                "(torch.device('npu', i), 'npu:i' or an index)."
            )
        return device.index if device.index is not None else NpuInterface.Worker.current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise TypeError(f"Expected a torch.device, str, int or None, but got {type(device).__name__}")


class NpuInterface(DeviceInterface):
    r"""The npu device as TorchDynamo and Inductor see it.

    Every member forwards to ``torch_npu.npu``; ``Worker`` answers from values
    the main process cached, for Inductor's compile workers, which must not
    start the device.
    """

    device = _npu.device  # type: ignore[assignment]
    Event = Event  # type: ignore[assignment]
    Stream = Stream  # type: ignore[assignment]

    class Worker:  # type: ignore[no-redef]
        r"""Device queries that work in compile worker processes (cached by the parent)."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["npu"] = device

        @staticmethod
        def current_device() -> int:
            if "npu" in caching_worker_current_devices:
                return caching_worker_current_devices["npu"]
            return _npu.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            index = _device_index(device)
            if "npu" not in caching_worker_device_properties:
                caching_worker_device_properties["npu"] = [
                    _npu.get_device_properties(i) for i in range(_npu.device_count())
                ]
            props = caching_worker_device_properties["npu"]
            if not 0 <= index < len(props):
                raise ValueError(
                    f"Invalid npu device index {index}: there are {len(props)} npu devices."
                )
            return props[index]

    current_device = staticmethod(_npu.current_device)
    set_device = staticmethod(_npu.set_device)
    device_count = staticmethod(_npu.device_count)
    stream = staticmethod(_npu.stream)  # type: ignore[assignment]
    current_stream = staticmethod(_npu.current_stream)
    set_stream = staticmethod(_npu.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_npu.synchronize)
    get_device_properties = staticmethod(_npu.get_device_properties)  # type: ignore[assignment]
    get_raw_stream = staticmethod(_C._npu_getCurrentRawStream)  # type: ignore[assignment]
    memory_allocated = staticmethod(_npu.memory_allocated)
    is_bf16_supported = staticmethod(_npu.is_bf16_supported)  # type: ignore[assignment]

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        r"""Make the stream with these ids current (what ``torch.Stream`` unpacks to)."""
        _npu.set_stream(Stream(stream_id=stream_id, device_index=device_index,
                               device_type=device_type))

    @staticmethod
    def exchange_device(device: int) -> int:
        r"""Make ``device`` current and return the previous one (``-1``: no change)."""
        if device < 0:
            return -1
        previous = _npu.current_device()
        if previous != device:
            _npu.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        r"""As :meth:`exchange_device`; the device is always initialised here."""
        return NpuInterface.exchange_device(device)

    @staticmethod
    def is_available() -> bool:
        return _npu.is_available()

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        r"""The chip's name, as torch_npu returns (npu has no CUDA-style capability)."""
        return _npu.get_device_name(_device_index(device))

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        r"""False: the simulated NPU runs no Triton kernels."""
        return False

    @staticmethod
    def raise_if_triton_unavailable(device: torch.types.Device = None) -> None:
        raise RuntimeError(
            "Triton is not available for npu: the simulated NPU runs no Triton kernels. "
            "torch.compile's npu code is generated as C++ (torch_npu._inductor)."
        )
