"""The NPU stream sanitizer (``torch_npu.npu._sanitizer``), torch_npu's CSAN.

Finds missing synchronization between streams while the program runs: a
tensor read or written on one stream while another stream's access to it is
not ordered before (``torch.cuda._sanitizer.CUDASanitizerErrors``, raised by
the op), and a tensor used on another stream than its allocation stream
without ``record_stream`` or a wait before it is freed
(:class:`~torch_npu.npu._stream_check.MissingRecordStreamError`, printed when
it is freed). The checks are in :mod:`torch_npu.npu._stream_check`.

Enable it at the very start of the program, before npu work, with
``TORCH_NPU_SANITIZER=1`` in the environment (read when torch_npu is
imported) or::

    import torch_npu.npu._sanitizer as sanitizer
    sanitizer.enable_npu_sanitizer()

Every op on npu tensors then goes through Python (a tiny op costs 20-30x its
host time; docs/PERFORMANCE.md). Only ops called on the enabling thread are checked (the dispatch mode
is per thread, as CSAN's). ``npu_sanitizer.disable()`` turns it off again.
"""

from __future__ import annotations

import atexit
import os
from typing import Callable, List, Tuple

import torch_npu
from torch_npu.npu import _gpu_trace
from torch_npu.npu import graphs as _graphs

__all__ = ["NPUSanitizer", "SanitizerMode", "enable_npu_sanitizer", "npu_sanitizer"]


class SanitizerMode:
    """torch_npu's sanitizer modes; only the stream check exists on the simulated NPU."""

    STREAM = 0
    KERNEL = 1


def _env_enabled() -> bool:
    """``TORCH_NPU_SANITIZER``: ``1`` enables, unset, empty or ``0`` does not; anything else raises."""
    value = os.environ.get("TORCH_NPU_SANITIZER", "")
    if value not in ("", "0", "1"):
        raise ValueError(
            f"TORCH_NPU_SANITIZER should be 0 or 1, but got {value!r}; set it to 1 to enable the NPU "
            "stream sanitizer, or unset it."
        )
    return value == "1"


class NPUSanitizer:
    """The process's sanitizer: owns the dispatch mode, the event handler and the hook registrations.

    ``enable()`` turns it on (a fresh handler each time), ``disable()`` off.
    ``event_handler`` (an :class:`~torch_npu.npu._stream_check.NPURecordStreamHandler`)
    holds the state, e.g. ``record_stream_errors`` and
    ``flush_record_stream_warnings()``.
    """

    def __init__(self) -> None:
        self.event_handler = None
        self.dispatch = None
        self.mode = SanitizerMode.STREAM
        self.enabled = False
        # torch_npu's flag: the record_stream check is on with TORCH_NPU_SANITIZER=1
        # (here it is on whenever the sanitizer is; kept for code that reads it).
        self.check_record_stream = os.environ.get("TORCH_NPU_SANITIZER", "0") == "1"
        self._registrations: List[Tuple[_gpu_trace.CallbackRegistry, Callable[..., None]]] = []

    def enable(self) -> None:
        """Start checking: registers the hooks' callbacks, activates the npu trace, enters the mode.

        A no-op if already enabled. Raises ``RuntimeError`` if
        ``ASCEND_OPP_DEBUG_PATH`` is set: torch_npu then picks its kernel check,
        which needs Ascend's debug kernels and does not exist on the simulated NPU.
        """
        if self.enabled:
            return
        if os.environ.get("ASCEND_OPP_DEBUG_PATH"):
            self.enable_kernel_check()  # raises: not available here
        self.mode = SanitizerMode.STREAM
        self.enable_stream_check()
        try:
            torch_npu._C._activate_npu_trace(self.mode)
        except BaseException:
            self._leave()
            raise
        self.enabled = True

    def enable_kernel_check(self) -> bool:
        """torch_npu's kernel check: ``False`` without ``ASCEND_OPP_DEBUG_PATH``, as torch_npu.

        With it set this raises ``RuntimeError``: the check needs Ascend's
        debug kernels, which do not exist on the simulated NPU.
        """
        if not os.environ.get("ASCEND_OPP_DEBUG_PATH"):
            return False
        raise RuntimeError(
            "ASCEND_OPP_DEBUG_PATH is set, which selects the NPU sanitizer's kernel check; it needs "
            "Ascend's debug kernels and is not available on the simulated NPU. Unset "
            "ASCEND_OPP_DEBUG_PATH to use the stream check."
        )

    def enable_stream_check(self) -> bool:
        """Make the handler and the dispatch mode, register the callbacks, enter the mode.

        Does not activate the npu trace (``enable()`` does). Returns ``True``.
        """
        # Imported here: importing torch.cuda._sanitizer turns PyTorch's GPU trace on.
        from torch_npu.npu import _stream_check

        self.event_handler = _stream_check.NPURecordStreamHandler()
        self.dispatch = _stream_check.NPUSanitizerDispatchMode(self.event_handler)
        self.dispatch.__enter__()
        self._register(self.event_handler)
        _graphs._capture_observer = self.dispatch
        return True

    def disable(self) -> None:
        """Stop checking: leaves the mode, turns the npu trace off, drops the callbacks.

        The event handler stays readable (``record_stream_errors``). A no-op if
        not enabled. Call it on the thread that enabled the sanitizer.
        """
        if not self.enabled:
            return
        self.enabled = False
        torch_npu._C._npu_deactivateTrace()
        self._leave()

    def _leave(self) -> None:
        try:
            if self.dispatch is not None:
                self.dispatch.__exit__(None, None, None)
        finally:
            if _graphs._capture_observer is self.dispatch:
                _graphs._capture_observer = None
            self.dispatch = None
            self._unregister()

    def __del__(self) -> None:
        # As torch_npu's: leave the mode if the sanitizer object goes first.
        try:
            self._leave()
        except Exception:
            pass

    def _register(self, handler: object) -> None:
        pairs = [
            (_gpu_trace.EventCreationCallbacks, "_handle_event_creation"),
            (_gpu_trace.EventDeletionCallbacks, "_handle_event_deletion"),
            (_gpu_trace.EventRecordCallbacks, "_handle_event_record"),
            (_gpu_trace.EventWaitCallbacks, "_handle_event_wait"),
            (_gpu_trace.MemoryAllocationCallbacks, "_handle_memory_allocation"),
            (_gpu_trace.MemoryDeallocationCallbacks, "_handle_memory_deallocation"),
            (_gpu_trace.StreamCreationCallbacks, "_handle_stream_creation"),
            (_gpu_trace.DeviceSynchronizationCallbacks, "_handle_device_synchronization"),
            (_gpu_trace.StreamSynchronizationCallbacks, "_handle_stream_synchronization"),
            (_gpu_trace.EventSynchronizationCallbacks, "_handle_event_synchronization"),
            (_gpu_trace.RecordStreamCallbacks, "_handle_record_stream"),
            (_gpu_trace.EraseStreamCallbacks, "_handle_erase_stream"),
        ]
        for registry, method in pairs:
            callback = getattr(handler, method)
            registry.add_callback(callback)
            self._registrations.append((registry, callback))

    def _unregister(self) -> None:
        for registry, callback in self._registrations:
            registry.remove_callback(callback)
        self._registrations.clear()

    def _at_exit(self) -> None:
        # Frees during interpreter shutdown would call into a half-torn-down
        # torch.npu; the checks have nothing left to protect by then.
        if self.enabled:
            torch_npu._C._npu_deactivateTrace()


def enable_npu_sanitizer() -> None:
    """Enable the NPU stream sanitizer (see the module docstring); a no-op if enabled."""
    npu_sanitizer.enable()


def _enable_from_env() -> None:
    """Called by ``import torch_npu``: enables the sanitizer if ``TORCH_NPU_SANITIZER=1``."""
    if _env_enabled():
        enable_npu_sanitizer()


npu_sanitizer: NPUSanitizer = NPUSanitizer()
atexit.register(npu_sanitizer._at_exit)
