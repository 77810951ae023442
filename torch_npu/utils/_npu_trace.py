"""torch_npu's names for the npu trace registries (``torch_npu.utils._npu_trace``).

Code written for torch_npu registers its callbacks here
(``register_callback_for_npu_event_record(cb, "name")``, ...). The registries
are those of :mod:`torch_npu.npu._gpu_trace` (PyTorch's names), so a callback
registered through either module sees the same hooks. The kernel-check hooks
(``register_callback_for_acl_start_execution`` and ``..._finish_execution``)
need Ascend's debug kernels and raise ``RuntimeError`` on the simulated NPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from torch_npu.npu import _gpu_trace as _gt

__all__ = [
    "CallbackRegistry",
    "NPUDeviceSynchronizationCallbacks",
    "NPUEraseStreamCallbacks",
    "NPUEventCreationCallbacks",
    "NPUEventDeletionCallbacks",
    "NPUEventRecordCallbacks",
    "NPUEventSynchronizationCallbacks",
    "NPUEventWaitCallbacks",
    "NPUMemoryAllocationCallbacks",
    "NPUMemoryDeallocationCallbacks",
    "NPURecordStreamCallbacks",
    "NPUStreamCreationCallbacks",
    "NPUStreamSynchronizationCallbacks",
    "print_check_msg",
    "register_callback_for_acl_finish_execution",
    "register_callback_for_acl_start_execution",
    "register_callback_for_npu_device_synchronization",
    "register_callback_for_npu_erase_stream",
    "register_callback_for_npu_event_creation",
    "register_callback_for_npu_event_deletion",
    "register_callback_for_npu_event_record",
    "register_callback_for_npu_event_synchronization",
    "register_callback_for_npu_event_wait",
    "register_callback_for_npu_memory_allocation",
    "register_callback_for_npu_memory_deallocation",
    "register_callback_for_npu_record_stream",
    "register_callback_for_npu_stream_creation",
    "register_callback_for_npu_stream_synchronization",
]

CallbackRegistry = _gt.CallbackRegistry

NPUEventCreationCallbacks = _gt.EventCreationCallbacks
NPUEventDeletionCallbacks = _gt.EventDeletionCallbacks
NPUEventRecordCallbacks = _gt.EventRecordCallbacks
NPUEventWaitCallbacks = _gt.EventWaitCallbacks
NPUMemoryAllocationCallbacks = _gt.MemoryAllocationCallbacks
NPUMemoryDeallocationCallbacks = _gt.MemoryDeallocationCallbacks
NPUStreamCreationCallbacks = _gt.StreamCreationCallbacks
NPUDeviceSynchronizationCallbacks = _gt.DeviceSynchronizationCallbacks
NPUStreamSynchronizationCallbacks = _gt.StreamSynchronizationCallbacks
NPUEventSynchronizationCallbacks = _gt.EventSynchronizationCallbacks
NPURecordStreamCallbacks = _gt.RecordStreamCallbacks
NPUEraseStreamCallbacks = _gt.EraseStreamCallbacks


def print_check_msg(msg: str) -> None:
    """Print ``msg`` prefixed with ``[sanitizer](<pid>)``, as torch_npu's checks do."""
    print(f"[sanitizer]({os.getpid()}) {msg}")


def _kernel_check_unavailable(cb: Callable[[str], None], cb_name: str) -> None:
    raise RuntimeError(
        "The NPU sanitizer's kernel check (ACL execution callbacks, ASCEND_OPP_DEBUG_PATH) needs "
        "Ascend's debug kernels and is not available on the simulated NPU; the stream check "
        "(torch_npu.npu._sanitizer.enable_npu_sanitizer()) is."
    )


def register_callback_for_acl_start_execution(cb: Callable[[str], None], cb_name: str) -> None:
    """Not available on the simulated NPU: raises ``RuntimeError``."""
    _kernel_check_unavailable(cb, cb_name)


def register_callback_for_acl_finish_execution(cb: Callable[[str], None], cb_name: str) -> None:
    """Not available on the simulated NPU: raises ``RuntimeError``."""
    _kernel_check_unavailable(cb, cb_name)


def register_callback_for_npu_event_creation(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(event)`` after an event was created."""
    NPUEventCreationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_deletion(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(event)`` before an event is destroyed."""
    NPUEventDeletionCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_record(cb: Callable[[int, int], None], cb_name: str) -> None:
    """``cb(event, stream)`` after an event record."""
    NPUEventRecordCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_wait(cb: Callable[[int, int], None], cb_name: str) -> None:
    """``cb(event, stream)`` after a stream wait on an event."""
    NPUEventWaitCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_memory_allocation(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(data_ptr)`` after an allocation."""
    NPUMemoryAllocationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_memory_deallocation(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(data_ptr)`` when a block is freed."""
    NPUMemoryDeallocationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_stream_creation(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(stream)`` after a stream was created."""
    NPUStreamCreationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_device_synchronization(cb: Callable[[], None], cb_name: str) -> None:
    """``cb()`` after a device synchronize."""
    NPUDeviceSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_stream_synchronization(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(stream)`` after a stream synchronize."""
    NPUStreamSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_synchronization(cb: Callable[[int], None], cb_name: str) -> None:
    """``cb(event)`` after an event synchronize."""
    NPUEventSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_record_stream(cb: Callable[[int, int], None], cb_name: str) -> None:
    """``cb(data_ptr, stream)`` after ``record_stream``."""
    NPURecordStreamCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_erase_stream(cb: Callable[[int, int], None], cb_name: str) -> None:
    """``cb(data_ptr, stream)`` after ``torch_npu.erase_stream``."""
    NPUEraseStreamCallbacks.add_callback(cb, cb_name)
