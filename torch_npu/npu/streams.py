"""Streams and events of the simulated NPU (``torch_npu.npu.streams``).

The classes wrap the C types ``torch_npu._C._NPUStreamBase`` (a subclass of
``torch.Stream``) and ``torch_npu._C._NPUEventBase`` (a subclass of
``torch.Event``), so PyTorch's generic stream code accepts them.
"""

import ctypes
import threading
from typing import Any, List, Optional, Tuple, Union

import torch

from .. import _C

__all__ = ["Stream", "Event", "SyncLaunchStream", "ExternalStream", "ExternalEvent"]

_DeviceLike = Union[torch.device, str, int, None]

_StreamBase = _C._NPUStreamBase
_EventBase = _C._NPUEventBase
_new_external = _C._npu_newExternalStream
_stream_enter = _C._npu_streamEnter
_stream_exit = _C._npu_streamExit
_check_stream_arg = _C._npu_checkStreamArg

# Note [Stream contexts keep their state per thread]
# Entering a stream (``with stream:``, ``with torch_npu.npu.stream(s):``)
# saves what exiting restores: the previous current device and the previous
# current stream of the stream's device. That state belongs to the entering
# thread, never to the shared stream or StreamContext object (torch.Stream's
# own __enter__ keeps it on the stream, so two threads entering one stream
# restore each other's streams). It lives on a per-thread stack of
# (context object, token) pairs; the token comes from _C._npu_streamEnter and
# encodes both saved values. __exit__ pops the entry of its own object.
_contexts = threading.local()


def _enter_stream(owner: object, stream: torch.Stream) -> None:
    """Make ``stream`` current for this thread; ``owner`` is the context object."""
    token = _stream_enter(stream)
    try:
        stack: List[Tuple[object, int]] = _contexts.stack
    except AttributeError:
        stack = _contexts.stack = []
    stack.append((owner, token))


def _exit_stream(owner: object, api: str) -> None:
    """Restore what the calling thread's latest entry of ``owner`` saved."""
    stack: Optional[List[Tuple[object, int]]] = getattr(_contexts, "stack", None)
    if stack:
        if stack[-1][0] is owner:  # the usual case: contexts exit in LIFO order
            _stream_exit(stack.pop()[1])
            return
        for i in range(len(stack) - 2, -1, -1):
            if stack[i][0] is owner:
                _stream_exit(stack.pop(i)[1])
                return
    raise RuntimeError(
        f"{api}.__exit__ was called without a matching __enter__ on this thread. Use the object "
        "in a with statement (or call __enter__ first), and exit it on the thread that entered it."
    )


def _is_event(event: object) -> bool:
    return isinstance(event, torch.Event)


def _device_index(device: _DeviceLike) -> int:
    """Index of an npu device given as torch.device, 'npu:N', int or None (-1 = current)."""
    if device is None:
        return -1
    if isinstance(device, bool):
        raise TypeError("Expected a torch.device, str, int or None, but got bool")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if not isinstance(device, torch.device):
        raise TypeError(f"Expected a torch.device, str, int or None, but got {type(device).__name__}")
    if device.type != "npu":
        raise ValueError(f"Expected a npu device, but got: {device}")
    return -1 if device.index is None else device.index


class _StreamMethods:
    """Methods shared by :class:`Stream` and :class:`SyncLaunchStream`.

    A mixin rather than a common base class: ``SyncLaunchStream`` is not a
    ``Stream`` (torch_npu's hierarchy), but both behave the same. Each class sets
    ``_repr_name`` and ``_stream_family`` (the class its streams compare equal to).
    """

    _repr_name = "Stream"
    _stream_family: type = object

    def wait_event(self, event):  # type: ("Event") -> None
        r"""Make all future work submitted to this stream wait for ``event``.

        Returns at once: only future work is affected.

        Args:
            event (Event): an :class:`Event` (or ``torch.Event`` of the npu
                device); anything else raises ``TypeError``.
        """
        if not _is_event(event):
            raise TypeError(f"wait_event expects a torch_npu.npu.Event, but got {type(event).__name__}")
        event.wait(self)

    def wait_stream(self, stream):  # type: (torch.Stream) -> None
        r"""Make all future work on this stream wait for the work queued on ``stream`` so far.

        Args:
            stream (Stream): a stream of an npu device (a ``torch.Stream`` of the
                npu device works too); anything else raises ``TypeError``, a
                stream of another device ``RuntimeError``.
        """
        if isinstance(stream, _StreamMethods):
            self.wait_event(stream.record_event())
            return
        # A generic torch.Stream: its record_event would make a torch.Event
        # through PyTorch's guard of its own device type (for a cpu stream:
        # "cpu backend doesn't support events"); validate it as an npu stream
        # and record one of ours on it.
        _check_stream_arg(stream, "wait_stream")
        event = Event()
        event.record(stream)
        self.wait_event(event)

    def record_event(self, event=None):  # type: (Optional["Event"]) -> "Event"
        r"""Record ``event`` (a new :class:`Event` if ``None``) on this stream and return it."""
        if event is None:
            event = Event()
        elif not _is_event(event):
            raise TypeError(f"record_event expects a torch_npu.npu.Event or None, but got {type(event).__name__}")
        event.record(self)
        return event

    def query(self):  # type: () -> bool
        r"""True if all work submitted to this stream has completed."""
        return super().query()

    def synchronize(self):  # type: () -> None
        r"""Wait until all work submitted to this stream has completed (releases the GIL)."""
        super().synchronize()

    def set_data_preprocess_stream(self, is_data_preprocess_stream=False):  # type: (bool) -> None
        r"""Mark the stream as a data-preprocess stream (accepted; no effect on the simulated NPU)."""
        super().set_data_preprocess_stream(is_data_preprocess_stream)

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.npu_stream)

    def __eq__(self, other: object) -> bool:
        # Equal only to streams of the same family (torch_npu's rule): a
        # Stream never equals a SyncLaunchStream or a generic torch.Stream.
        if isinstance(other, self._stream_family):
            return super().__eq__(other)
        return False

    def __ne__(self, other: object) -> bool:
        # Not inherited: the C base's != compares any torch.Stream by its
        # triple, so `s != g` was False while `s == g` was False too.
        return not self.__eq__(other)

    def __hash__(self) -> int:
        # hash((npu_stream, device)) as in torch_npu, with npu_stream's value
        # read without draining the task queue (a host sync per dict lookup
        # otherwise), and still readable once an external stream was
        # destroyed; see Note [Stream hash and repr do not drain] in
        # csrc/python/Streams.cpp.
        return hash((self._raw_npu_stream, self.device))

    def __repr__(self) -> str:
        return f"<torch_npu.npu.{self._repr_name} device={self.device} npu_stream={self._raw_npu_stream:#x}>"

    def __enter__(self):  # type: () -> Any
        r"""Make this stream (and its device) current for the calling thread.

        The state that :meth:`__exit__` restores is kept per thread, so one
        stream object may be entered by several threads at once (see Note
        [Stream contexts keep their state per thread]).
        """
        _enter_stream(self, self)
        return self

    def __exit__(self, *args):  # type: (*Any) -> None
        r"""Restore the device and stream that the matching :meth:`__enter__` saved.

        Raises ``RuntimeError`` if this thread did not enter the stream.
        """
        _exit_stream(self, f"{type(self).__name__}")


class Stream(_StreamMethods, _StreamBase):
    r"""Wrapper around a stream of the simulated NPU.

    A stream is an in-order queue of work on one device; work queued on
    different streams may run concurrently. Streams come from per-device pools
    (round robin) and live until process exit.

    Args:
        device (torch.device or int, optional): the device of the stream; the
            current device if ``None`` (default) or a negative integer.
        priority (int, optional): ``<= -1`` gives a high-priority stream, any
            other int a normal one (default ``0``); not an int: ``TypeError``.
        **kwargs: ``is_sync_launch`` (a stream whose launches bypass the task
            queue), or ``stream_id``, ``device_index`` and ``device_type`` to
            rebuild a stream from its triple (validated), or ``stream_ptr`` (see
            :class:`ExternalStream`).
    """

    def __new__(cls, device=None, priority=0, **kwargs):  # type: (_DeviceLike, int, **Any) -> "Stream"
        return _StreamBase.__new__(cls, device, priority, **kwargs)

    _repr_name = "Stream"


class ExternalStream(Stream):
    r"""Wrapper around a stream created outside PyTorch (by another library through npurt).

    Wrapping a raw handle registers it in the device's external-stream registry:
    the same handle always gives the same ``stream_id``, so two wrappers of one
    handle compare equal. The stream can be made current (``with
    torch_npu.npu.stream(ext):``) and ops then run on it; device-wide
    :func:`torch_npu.npu.synchronize` covers it.

    .. note:: PyTorch never owns an external stream: the library that created it
       destroys it, and must keep it alive while PyTorch work may be queued on
       it. When the runtime destroys it, its registry entry is dropped: a later
       stream at the same address is a new entry, and wrappers of the destroyed
       stream raise ``RuntimeError`` on use.

    .. note:: ``priority`` and ``is_sync_launch`` must keep their defaults; passing
       them raises ``RuntimeError``.

    Args:
        stream_ptr (int): the ``npuStream_t`` handle as an integer. ``0`` is a
            ``ValueError`` (it means "no stream").
        device (torch.device or int, optional): the device of the stream. ``None``
            (default) takes the device the handle belongs to; a device that
            disagrees with the handle's is a ``RuntimeError``. The
            ``device_index`` keyword names a device the same way.

    Checks beyond torch_npu (always on): ``stream_ptr=0`` → ``ValueError``;
    ``stream_ptr`` together with a non-zero ``stream_id``/``device_type`` →
    ``ValueError``; ``device``/``device_index`` that disagree with the
    handle's device → ``RuntimeError`` (``device`` and ``device_index`` that
    disagree with each other → ``ValueError``); a garbage or destroyed handle
    → ``RuntimeError`` naming the handle.

    Unsupported scenarios in compat mode (the default; they raise ``RuntimeError``
    with torch_npu's messages):

    .. list-table::
        :widths: 35 65
        :header-rows: 1

        * - API
          - Description
        * - ``synchronize()``
          - Caller must synchronize the external stream externally.
        * - ``query()``
          - Caller must track stream completion externally.
        * - ``record_event()`` / ``Event.record(ext)`` /
            ``ExternalEvent.record(ext)``
          - Event recording on an external stream is not supported.
        * - ``wait_event(event)`` / ``wait_stream(stream)`` /
            ``Event.wait(ext)`` / ``ExternalEvent.wait(ext)``
          - Event waiting on an external stream is not supported.
        * - ``Tensor.record_stream(ext)``
          - Caching allocator stream tracking is not supported.
        * - ``NPUGraph.capture_begin()`` / ``capture_end()``
          - Graph capture on an external stream is not supported.
        * - ``graph_task_group_begin`` / ``end`` /
            ``graph_task_update_begin`` / ``end``
          - Graph task group APIs are not supported.
        * - ``super_kernel_scope_begin`` / ``end``
          - Super kernel scope is not supported.
        * - ``launch_callback``
          - Host callback launch is not supported.
        * - ``subscribe_report`` / ``unsubscribe_report``
          - Task report subscribe/unsubscribe is not supported.
        * - the task queue's record / wait event tasks
          - Async task queue event ops are not supported.
        * - ``npu_stream`` with ``PER_STREAM_QUEUE=1``
          - The per-stream task queues do not track external streams.

    The reason: these paths go through the task queue, which in compat mode only
    tracks the streams torch_npu created itself. In full mode
    (``TORCH_NPU_EXTERNAL_STREAM_MODE=full`` or
    ``torch_npu.npu.set_external_stream_mode('full')``) the task queue tracks
    external streams too, and synchronize, query, event record/wait,
    ``wait_stream`` and ``record_stream`` work with the same ordering guarantees
    as on a managed stream. Graph capture, task groups, super-kernel scopes,
    callbacks and reports are not supported on the simulated NPU in either mode.
    See docs/EXTERNAL_STREAMS.md.
    """

    def __new__(cls, stream_ptr, device=None, **kwargs):  # type: (int, _DeviceLike, **Any) -> "ExternalStream"
        if stream_ptr is None:
            raise TypeError("ExternalStream expects stream_ptr to be an int (an npuStream_t handle), but got None")
        if not kwargs:
            return _new_external(cls, stream_ptr, device)  # fast path: no keyword parsing
        return _StreamBase.__new__(cls, device, stream_ptr=stream_ptr, **kwargs)


class SyncLaunchStream(_StreamMethods, _StreamBase):
    r"""A stream whose launches bypass the task queue (torch_npu's sync-launch pool).

    Not a subclass of :class:`Stream`, as in torch_npu. Args as :class:`Stream`.
    """

    def __new__(cls, device=None, priority=0, **kwargs):  # type: (_DeviceLike, int, **Any) -> "SyncLaunchStream"
        return _StreamBase.__new__(cls, device, priority, is_sync_launch=1, **kwargs)

    _repr_name = "SyncLaunchStream"


class Event(_EventBase):
    r"""Wrapper around an event of the simulated NPU.

    The runtime event is created lazily, on the first record, on the device of
    the recording stream; only streams of that device may record it later, but
    streams of any device may wait on it. An event never recorded queries
    ``True``, and waiting on it is a no-op.

    Args:
        enable_timing (bool, optional): whether the event measures time (default ``False``).
        blocking (bool, optional): whether :meth:`synchronize` blocks instead of
            polling (default ``False``; the simulated device always blocks).
        interprocess (bool, optional): whether other processes may use the event
            (:meth:`ipc_handle`, :meth:`from_ipc_handle`, or sending it through
            ``torch.multiprocessing``); needs ``enable_timing=False``. Such an event is
            made on the current device at once; any process holding it may record it,
            wait on it, query and synchronize it (Note [Inter-process events] in
            ``csrc/core/NPUIpcEvent.h``).
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):  # type: (bool, bool, bool) -> "Event"
        return _EventBase.__new__(
            cls, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess, graph_external=False
        )

    @classmethod
    def from_ipc_handle(cls, device, handle):  # type: (_DeviceLike, bytes) -> "Event"
        r"""Open in this process the interprocess event another process's :meth:`ipc_handle` names.

        The event must still exist in the process that created it.
        """
        return super().from_ipc_handle(device, handle)

    def record(self, stream=None):  # type: (Optional[torch.Stream]) -> None
        r"""Record the event on ``stream`` (the current stream if ``None``).

        The stream's device must match the event's device.
        """
        super().record(stream)

    def wait(self, stream=None):  # type: (Optional[torch.Stream]) -> None
        r"""Make all future work on ``stream`` (the current stream if ``None``) wait for this event."""
        super().wait(stream)

    def query(self):  # type: () -> bool
        r"""True if the work captured by the latest record has completed (or never recorded)."""
        return super().query()

    def elapsed_time(self, end_event):  # type: ("Event") -> float
        r"""Milliseconds between this event's and ``end_event``'s completion (waits for both)."""
        return super().elapsed_time(end_event)

    def synchronize(self):  # type: () -> None
        r"""Wait until the work captured by the latest record has completed (releases the GIL)."""
        super().synchronize()

    def ipc_handle(self):  # type: () -> bytes
        r"""The 64-byte handle :meth:`from_ipc_handle` opens in another process (``interprocess=True`` only)."""
        return super().ipc_handle()

    def recorded_time(self):  # type: () -> int
        r"""Completion time of the latest record, in microseconds on the runtime's monotonic clock."""
        return super().recorded_time()

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.npu_event)

    def __repr__(self) -> str:
        if self.npu_event:
            return f"<torch_npu.npu.Event {self._as_parameter_.value:#x}>"
        return "<torch_npu.npu.Event uninitialized>"


class ExternalEvent(_EventBase):
    r"""An event whose :meth:`wait` may be issued before its :meth:`record`.

    ``record`` writes a value when the work queued before it on its stream has
    finished; ``wait`` makes future work on its stream wait for that value and
    resets it. One record pairs with one wait: a second wait of the same record
    raises. Call :meth:`reset` before reusing the event.

    .. note:: On the simulated NPU a wait issued before its record parks the
       waiting stream behind a *gate* (a version of a private runtime event
       that the record completes). Like any wait it holds no executor core,
       so any number of waits may come before their records.
    """

    def __new__(cls):  # type: () -> "ExternalEvent"
        return _EventBase.__new__(cls, enable_timing=False, blocking=False, interprocess=False, graph_external=True)

    def record(self, stream=None):  # type: (Optional[torch.Stream]) -> None
        r"""Write the event's value on ``stream`` (the current stream if ``None``)."""
        super().record(stream)

    def wait(self, stream=None):  # type: (Optional[torch.Stream]) -> None
        r"""Make future work on ``stream`` (the current stream if ``None``) wait for the value."""
        super().wait(stream)

    def reset(self, stream=None):  # type: (Optional[torch.Stream]) -> None
        r"""Clear the event's pairing state; make sure the work that used it finished first."""
        super().reset(stream)

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.npu_event)

    def __repr__(self) -> str:
        if self.npu_event:
            return f"<torch_npu.npu.ExternalEvent {self._as_parameter_.value:#x}>"
        return "<torch_npu.npu.ExternalEvent uninitialized>"


_C._npu_registerStreamClass(Stream)


Stream._stream_family = Stream
SyncLaunchStream._stream_family = SyncLaunchStream
