"""Callback registries of the npu trace hooks (``torch.npu._gpu_trace``).

The backend reports what a stream sanitizer needs — event creation, deletion,
record, wait and synchronization; stream creation and synchronization; device
synchronization; memory allocation and free — through PyTorch's GPU trace,
which calls ``torch.<backend>._gpu_trace.<Kind>Callbacks.fire_callbacks(...)``
for the device type. This module is that target for ``npu``, with the names of
``torch.cuda._gpu_trace``, plus torch_npu's two hooks PyTorch has no slot for:
``record_stream`` and ``erase_stream`` of the caching allocator.

Nothing fires until the npu trace is active (``torch_npu._C._activate_npu_trace``,
which the stream sanitizer calls). Arguments: events and streams are their
runtime handles (``Event.npu_event``, ``Stream.npu_stream``), memory is a
storage's ``data_ptr()``. Callbacks run on the thread that made the call, with
the GIL; an exception in a callback is logged, not raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from torch._utils import CallbackRegistry as _TorchCallbackRegistry

__all__ = [
    "CallbackRegistry",
    "DeviceSynchronizationCallbacks",
    "EraseStreamCallbacks",
    "EventCreationCallbacks",
    "EventDeletionCallbacks",
    "EventRecordCallbacks",
    "EventSynchronizationCallbacks",
    "EventWaitCallbacks",
    "MemoryAllocationCallbacks",
    "MemoryDeallocationCallbacks",
    "RecordStreamCallbacks",
    "StreamCreationCallbacks",
    "StreamSynchronizationCallbacks",
    "register_callback_for_device_synchronization",
    "register_callback_for_erase_stream",
    "register_callback_for_event_creation",
    "register_callback_for_event_deletion",
    "register_callback_for_event_record",
    "register_callback_for_event_synchronization",
    "register_callback_for_event_wait",
    "register_callback_for_memory_allocation",
    "register_callback_for_memory_deallocation",
    "register_callback_for_record_stream",
    "register_callback_for_stream_creation",
    "register_callback_for_stream_synchronization",
]


class CallbackRegistry(_TorchCallbackRegistry):
    """PyTorch's registry; also takes torch_npu's ``add_callback(cb, cb_name)`` and can remove."""

    def add_callback(self, cb: Callable[..., None], cb_name: Optional[str] = None) -> None:
        """Add ``cb``; ``cb_name`` (torch_npu's signature) is accepted and not needed."""
        super().add_callback(cb)

    def remove_callback(self, cb: Callable[..., None]) -> None:
        """Remove every registration of ``cb``; a callback never added is ignored."""
        self.callback_list[:] = [c for c in self.callback_list if c is not cb]


EventCreationCallbacks = CallbackRegistry("NPU event creation")
EventDeletionCallbacks = CallbackRegistry("NPU event deletion")
EventRecordCallbacks = CallbackRegistry("NPU event record")
EventWaitCallbacks = CallbackRegistry("NPU event wait")
MemoryAllocationCallbacks = CallbackRegistry("NPU memory allocation")
MemoryDeallocationCallbacks = CallbackRegistry("NPU memory deallocation")
StreamCreationCallbacks = CallbackRegistry("NPU stream creation")
DeviceSynchronizationCallbacks = CallbackRegistry("NPU device synchronization")
StreamSynchronizationCallbacks = CallbackRegistry("NPU stream synchronization")
EventSynchronizationCallbacks = CallbackRegistry("NPU event synchronization")
# torch_npu's additions: (storage data_ptr, stream handle).
RecordStreamCallbacks = CallbackRegistry("NPU record_stream")
EraseStreamCallbacks = CallbackRegistry("NPU erase_stream")


def register_callback_for_event_creation(cb: Callable[[int], None]) -> None:
    """``cb(event)`` after an event was created (at its first record)."""
    EventCreationCallbacks.add_callback(cb)


def register_callback_for_event_deletion(cb: Callable[[int], None]) -> None:
    """``cb(event)`` before an event is destroyed."""
    EventDeletionCallbacks.add_callback(cb)


def register_callback_for_event_record(cb: Callable[[int, int], None]) -> None:
    """``cb(event, stream)`` after an event was recorded on a stream."""
    EventRecordCallbacks.add_callback(cb)


def register_callback_for_event_wait(cb: Callable[[int, int], None]) -> None:
    """``cb(event, stream)`` after a stream was made to wait for an event."""
    EventWaitCallbacks.add_callback(cb)


def register_callback_for_memory_allocation(cb: Callable[[int], None]) -> None:
    """``cb(data_ptr)`` after the caching allocator handed out a block."""
    MemoryAllocationCallbacks.add_callback(cb)


def register_callback_for_memory_deallocation(cb: Callable[[int], None]) -> None:
    """``cb(data_ptr)`` when a block is freed (before it can be reused)."""
    MemoryDeallocationCallbacks.add_callback(cb)


def register_callback_for_stream_creation(cb: Callable[[int], None]) -> None:
    """``cb(stream)`` after a pool stream was created."""
    StreamCreationCallbacks.add_callback(cb)


def register_callback_for_device_synchronization(cb: Callable[[], None]) -> None:
    """``cb()`` after the host waited for all work of a device."""
    DeviceSynchronizationCallbacks.add_callback(cb)


def register_callback_for_stream_synchronization(cb: Callable[[int], None]) -> None:
    """``cb(stream)`` after the host waited for the work queued on a stream."""
    StreamSynchronizationCallbacks.add_callback(cb)


def register_callback_for_event_synchronization(cb: Callable[[int], None]) -> None:
    """``cb(event)`` after the host waited for an event."""
    EventSynchronizationCallbacks.add_callback(cb)


def register_callback_for_record_stream(cb: Callable[[int, int], None]) -> None:
    """``cb(data_ptr, stream)`` after ``record_stream`` (any entry point) took effect."""
    RecordStreamCallbacks.add_callback(cb)


def register_callback_for_erase_stream(cb: Callable[[int, int], None]) -> None:
    """``cb(data_ptr, stream)`` after ``torch_npu.erase_stream`` took effect."""
    EraseStreamCallbacks.add_callback(cb)
