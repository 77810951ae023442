"""The checks of the NPU stream sanitizer (``torch_npu.npu._stream_check``).

Two checks, both fed by the npu trace hooks (:mod:`torch_npu.npu._gpu_trace`)
and a dispatch mode that sees every op on npu tensors:

- **Data races** — PyTorch's CSAN (``torch.cuda._sanitizer``), extended rather
  than rewritten: its ``EventHandler`` keeps, per tensor, the last write and the
  reads since, and per stream a vector of the sequence numbers of the other
  streams it is known to be ordered after (events, ``wait_stream``,
  synchronizations). An op that reads or writes a tensor whose previous access
  on another stream is not ordered before it raises
  ``torch.cuda._sanitizer.CUDASanitizerErrors`` holding one
  ``UnsynchronizedAccessError`` per tensor, which names both ops, both streams
  and both stacks (printed to stderr too).
- **Missing record_stream** (torch_npu's addition) — a tensor used on a stream
  other than the one it was allocated on must either be ``record_stream``-ed on
  that stream, or its allocation stream must wait for that use (an event,
  ``wait_stream``, a device synchronize) before the tensor is freed; otherwise
  the caching allocator may hand its memory out again while the use still
  runs. Checked when the tensor is freed (and by
  :meth:`NPURecordStreamHandler.flush_record_stream_warnings`): each violation
  is a :class:`MissingRecordStreamError`, printed to stderr and collected in
  ``record_stream_errors``; it is not raised, as a free cannot raise.

On the simulated NPU a missing ``record_stream`` cannot corrupt data (the
allocator keeps a block that a queued task of another stream uses from reuse
until the task ran), but the same program
can on an Ascend device; the check reports what would break there.

Importing this module imports ``torch.cuda._sanitizer``, which turns on
PyTorch's GPU trace for the process (CSAN does so at import); the npu hooks
still fire only while the npu trace is active (the sanitizer's ``enable()``).
"""

from __future__ import annotations

import functools
import inspect
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

import torch
import torch.cuda._sanitizer as csan
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu

__all__ = [
    "CrossStreamUsage",
    "MissingRecordStreamError",
    "NPUArgumentHandler",
    "NPURecordStreamHandler",
    "NPUSanitizerDispatchMode",
    "NPUTensorInfo",
]

_current_raw_stream = torch_npu._C._npu_getCurrentRawStreamNoWait


def _stack_here() -> traceback.StackSummary:
    """The Python stack of the caller, outermost frame first (lines read lazily)."""
    stack = traceback.StackSummary.extract(traceback.walk_stack(inspect.currentframe()), lookup_lines=False)
    stack.reverse()
    return stack


@dataclass
class CrossStreamUsage:
    """The latest use of a tensor on a stream other than its allocation stream.

    Args:
        usage_stream: the stream of the use.
        seq_num: the sanitizer's sequence number of the op that used it.
        operator: that op's schema.
        stack_trace: the Python stack of the op's call.
    """

    usage_stream: csan.StreamId
    seq_num: csan.SeqNum
    operator: str
    stack_trace: traceback.StackSummary


@dataclass
class NPUTensorInfo:
    """What the record_stream check knows of one allocation (a storage's data pointer).

    Kept apart from CSAN's per-tensor access record, which forgets reads at
    every write; this one keeps every cross-stream use until the free.
    """

    allocation_stream: Optional[csan.StreamId] = None
    allocation_stack_trace: Optional[traceback.StackSummary] = None
    recorded_streams: Set[csan.StreamId] = field(default_factory=set)
    cross_stream_usages: Dict[csan.StreamId, CrossStreamUsage] = field(default_factory=dict)


class MissingRecordStreamError(csan.SynchronizationError):
    """A tensor was freed after a use on another stream that nothing protected.

    Neither ``tensor.record_stream(usage_stream)`` was called, nor did the
    allocation stream wait for the use (``allocation_stream.wait_stream(
    usage_stream)``, an event recorded after the use and waited for on the
    allocation stream, or a device synchronize) before the free.
    """

    def __init__(
        self,
        data_ptr: csan.DataPtr,
        allocation_stack_trace: Optional[traceback.StackSummary],
        allocation_stream: csan.StreamId,
        usage_stream: csan.StreamId,
        usage: CrossStreamUsage,
        recorded_streams: Set[csan.StreamId],
    ) -> None:
        super().__init__()
        self.data_ptr = data_ptr
        self.allocation_stack_trace = allocation_stack_trace
        self.allocation_stream = allocation_stream
        self.usage_stream = usage_stream
        self.usage = usage
        self.recorded_streams = recorded_streams

    def __repr__(self) -> str:
        return (
            f"MissingRecordStreamError(data_ptr={self.data_ptr}, alloc_stream={self.allocation_stream}, "
            f"usage_stream={self.usage_stream}, operator='{self.usage.operator}')"
        )

    def __str__(self) -> str:
        lines = [
            "============================",
            "NPUSanitizer: missing record_stream detected!",
            f"Tensor (data ptr: {self.data_ptr}) allocated on stream {self.allocation_stream}",
            f"was used on stream {self.usage_stream} without record_stream or",
            "creation_stream.wait_stream(usage_stream).",
            "",
            "This may cause use-after-free if the caching allocator reuses memory",
            "on the allocation stream before the usage stream finishes.",
            "",
            "Fix with ONE of:",
            "  A) tensor.record_stream(stream) — tell allocator about the usage",
            "  B) creation_stream.wait_stream(usage_stream) before deallocation",
            "",
            "Cross-stream usage during kernel:",
            f"  {self.usage.operator}",
            f"With stack trace:\n{''.join(self.usage.stack_trace.format())}",
        ]
        if self.recorded_streams:
            lines.append(f"Streams recorded via record_stream: {sorted(self.recorded_streams)}")
        else:
            lines.append("No streams were recorded via record_stream.")
        if self.allocation_stack_trace:
            lines.append(f"Tensor was allocated with stack trace:\n{''.join(self.allocation_stack_trace.format())}")
        return "\n".join(lines) + "\n"


class NPURecordStreamHandler(csan.EventHandler):
    """CSAN's event handler plus the missing-record_stream check (torch_npu's name).

    The check runs when a tensor is freed, not when the other stream uses it: a
    program may well synchronize after the use and before the free, and only
    then is the memory safe to reuse. The hooks call the ``_handle_*`` methods
    (see :class:`torch_npu.npu._sanitizer.NPUSanitizer`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._npu_tensors: Dict[csan.DataPtr, NPUTensorInfo] = {}
        self.record_stream_errors: List[MissingRecordStreamError] = []

    # -- hooks -------------------------------------------------------------
    def _handle_memory_allocation(self, data_ptr: csan.DataPtr) -> None:
        super()._handle_memory_allocation(data_ptr)
        # The allocator takes blocks for the current stream of the current
        # device (the device of the tensor being made, under its guard). Blocks
        # of a graph's private pool stay with the graph, not with a stream:
        # they need no record_stream.
        capturing = torch_npu._C._npu_isCurrentStreamCapturing()
        self._npu_tensors[data_ptr] = NPUTensorInfo(
            allocation_stream=None if capturing else _current_raw_stream(torch_npu._C._npu_getDevice()),
            allocation_stack_trace=self.tensors_accessed.get_allocation_stack_trace(data_ptr),
        )

    def _handle_memory_deallocation(self, data_ptr: csan.DataPtr) -> None:
        for error in self._record_stream_errors(data_ptr):
            print(error, file=sys.stderr)
            self.record_stream_errors.append(error)
        self._npu_tensors.pop(data_ptr, None)
        super()._handle_memory_deallocation(data_ptr)

    def _handle_record_stream(self, data_ptr: csan.DataPtr, stream: csan.StreamId) -> None:
        self._npu_tensors.setdefault(data_ptr, NPUTensorInfo()).recorded_streams.add(stream)

    def _handle_erase_stream(self, data_ptr: csan.DataPtr, stream: csan.StreamId) -> None:
        info = self._npu_tensors.get(data_ptr)
        if info is not None:
            info.recorded_streams.discard(stream)

    # -- ops ---------------------------------------------------------------
    def _handle_kernel_launch(  # type: ignore[override]
        self,
        stream: csan.StreamId,
        read_only: Set[csan.DataPtr],
        read_write: Set[csan.DataPtr],
        outputs: Set[csan.DataPtr],
        operator: Any,
        tensor_aliases: Dict[int, List[str]],
        storage_dataptrs_accessed: Optional[Set[csan.DataPtr]] = None,
    ) -> List[csan.SynchronizationError]:
        """CSAN's race check, then note the op's uses of tensors of other streams.

        ``storage_dataptrs_accessed`` are the storages' data pointers (what the
        allocation and record_stream hooks report); CSAN's sets hold the
        tensors' own, which differ for views with an offset.
        """
        errors = super()._handle_kernel_launch(stream, read_only, read_write, outputs, operator, tensor_aliases)
        accessed = storage_dataptrs_accessed if storage_dataptrs_accessed is not None else read_only | read_write
        stack: Optional[traceback.StackSummary] = None
        for data_ptr in accessed:
            info = self._npu_tensors.get(data_ptr)
            if info is None or info.allocation_stream is None or info.allocation_stream == stream:
                continue
            if stack is None:
                stack = _stack_here()
            # The latest use is the one the allocation stream must wait for.
            info.cross_stream_usages[stream] = CrossStreamUsage(stream, self.seq_num, str(operator), stack)
        return errors

    # -- the check ---------------------------------------------------------
    def _is_creation_stream_synced_to_usage(
        self, creation_stream: csan.StreamId, usage_stream: csan.StreamId, usage_seq_num: csan.SeqNum = 0
    ) -> bool:
        """True if ``creation_stream`` is ordered after op ``usage_seq_num`` of ``usage_stream``."""
        state = self.syncs.current_sync_states.get(creation_stream, {})
        return state.get(usage_stream, -1) >= usage_seq_num

    def _record_stream_errors(self, data_ptr: csan.DataPtr) -> List[MissingRecordStreamError]:
        info = self._npu_tensors.get(data_ptr)
        if info is None or info.allocation_stream is None:
            return []
        return [
            MissingRecordStreamError(
                data_ptr,
                info.allocation_stack_trace,
                info.allocation_stream,
                usage_stream,
                usage,
                set(info.recorded_streams),
            )
            for usage_stream, usage in info.cross_stream_usages.items()
            if usage_stream not in info.recorded_streams
            and not self._is_creation_stream_synced_to_usage(info.allocation_stream, usage_stream, usage.seq_num)
        ]

    def flush_record_stream_warnings(self) -> List[MissingRecordStreamError]:
        """Check every live tensor now, as if it were freed; print and return the errors.

        For the end of a program or a test, after its synchronizations: tensors
        still alive are otherwise only checked when they are freed. The errors
        are also appended to ``record_stream_errors``.
        """
        errors = [e for data_ptr in list(self._npu_tensors) for e in self._record_stream_errors(data_ptr)]
        for error in errors:
            print(error, file=sys.stderr)
        self.record_stream_errors.extend(errors)
        return errors


class NPUArgumentHandler(csan.ArgumentHandler):
    """CSAN's argument handler for npu tensors; also collects storages and the device."""

    def __init__(self) -> None:
        super().__init__()
        self.storage_dataptrs_accessed: Set[csan.DataPtr] = set()
        self.device_index: Optional[int] = None

    def _handle_argument(
        self,
        value: Any,
        is_write: bool,
        metadata_only: bool,
        name: Optional[str] = None,
        is_output: bool = False,
    ) -> None:
        if not isinstance(value, torch.Tensor) or value.device.type != "npu":
            return
        if self.device_index is None:
            self.device_index = value.device.index
        # As CSAN: a null data_ptr (an empty tensor) is told apart by id().
        data_ptr = value.data_ptr() or id(value)
        if is_write:
            self.dataptrs_written.add(data_ptr)
        elif not metadata_only:
            self.dataptrs_read.add(data_ptr)
        self.tensor_aliases.setdefault(data_ptr, [])
        if name is not None:
            self.tensor_aliases[data_ptr].append(name)
        if is_output:
            self.outputs.add(data_ptr)
        if is_write or not metadata_only:
            storage_ptr = value.untyped_storage().data_ptr()
            if storage_ptr:
                self.storage_dataptrs_accessed.add(storage_ptr)

    def parse_outputs(self, schema: Any, outputs: Any, *, is_factory: bool) -> None:
        """As CSAN's, except that a factory's outputs are writes (torch_npu's rule).

        ``empty_like(a)`` reads only ``a``'s metadata, but its result is fresh
        memory the op produced; only outputs that are views are metadata.
        """
        for ret, value in zip(schema.returns, (outputs,)):
            metadata_only = ret.alias_info is not None and not ret.alias_info.is_write
            pytree.tree_map_(
                functools.partial(
                    self._handle_argument, is_write=not metadata_only, metadata_only=metadata_only, is_output=True
                ),
                value,
            )


@dataclass
class _CapturedAccesses:
    """What the ops of one graph capture read and wrote (reported at each replay)."""

    read: Set[csan.DataPtr] = field(default_factory=set)
    written: Set[csan.DataPtr] = field(default_factory=set)
    storages: Set[csan.DataPtr] = field(default_factory=set)
    operators: List[str] = field(default_factory=list)

    def add(self, handler: "NPUArgumentHandler", operator: str) -> None:
        self.read |= handler.dataptrs_read - handler.dataptrs_written
        self.written |= handler.dataptrs_written
        self.storages |= handler.storage_dataptrs_accessed
        self.operators.append(operator)


class NPUSanitizerDispatchMode(TorchDispatchMode):
    """Reports every op on npu tensors to ``event_handler`` as a kernel launch.

    The op runs on the current stream of the device of its first npu tensor
    (the current device if it has none). Ops captured into an ``NPUGraph`` do
    not run then: their accesses are noted and reported, as one launch on the
    replay stream, at each ``NPUGraph.replay()`` (the ``capture_*``/``replay``
    methods are called by torch_npu.npu.graphs while the sanitizer is on). Raises
    ``torch.cuda._sanitizer.CUDASanitizerErrors`` after an op whose accesses
    race with earlier ones; the op has run (been queued) by then, as in CSAN.
    ``args_handler`` is the :class:`NPUArgumentHandler` of the op being
    dispatched (torch_npu's attribute).
    """

    def __init__(self, event_handler: NPURecordStreamHandler) -> None:
        super().__init__()
        self.event_handler = event_handler
        self.args_handler: Optional[NPUArgumentHandler] = None
        self._capture: Optional[_CapturedAccesses] = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = {} if kwargs is None else kwargs
        # record_stream is no access; the allocator's hook reports it, from
        # every entry point (Tensor.record_stream, torch.Stream, c10d).
        if func is torch.ops.aten.record_stream.default:
            return func(*args, **kwargs)
        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(func._schema.name))
        self.args_handler = NPUArgumentHandler()
        self.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        self.parse_outputs(func._schema, outputs, is_factory=is_factory)
        handler = self.args_handler
        if not (handler.dataptrs_read or handler.dataptrs_written or handler.storage_dataptrs_accessed):
            return outputs
        # Under graph capture nothing runs: the op's accesses happen at each replay.
        if torch_npu._C._npu_isCurrentStreamCapturing():
            if self._capture is not None:
                self._capture.add(handler, str(func._schema))
            return outputs
        device = handler.device_index if handler.device_index is not None else torch_npu._C._npu_getDevice()
        self.check_errors(func, _current_raw_stream(device))
        return outputs

    # -- graphs (called by torch_npu.npu.graphs.NPUGraph) --------------------
    def capture_begin(self, graph: Any) -> None:
        """Start noting the accesses of the ops captured into ``graph``."""
        self._capture = _CapturedAccesses()

    def capture_end(self, graph: Any) -> None:
        """Keep the noted accesses with ``graph`` for its replays."""
        graph._sanitizer_accesses, self._capture = self._capture, None

    def replay(self, graph: Any) -> None:
        """Report a replay as one launch of all the captured accesses on the current stream."""
        captured: Optional[_CapturedAccesses] = getattr(graph, "_sanitizer_accesses", None)
        if captured is None or not (captured.read or captured.written):
            return
        operator = f"NPUGraph.replay() of {len(captured.operators)} captured ops: " + ", ".join(
            dict.fromkeys(op.split("(", 1)[0] for op in captured.operators)
        )
        errors = self.event_handler._handle_kernel_launch(
            _current_raw_stream(torch_npu._C._npu_getDevice()),
            set(captured.read),
            set(captured.written),
            set(),
            operator,
            {ptr: [] for ptr in captured.read | captured.written},
            storage_dataptrs_accessed=set(captured.storages),
        )
        self._raise(errors)

    def parse_inputs(self, schema: Any, args: Any, kwargs: Any, is_factory: bool = False) -> None:
        """Collect the op's inputs into ``args_handler``."""
        self.args_handler.parse_inputs(schema, args, kwargs, is_factory=is_factory)

    def parse_outputs(self, schema: Any, outputs: Any, is_factory: bool = False) -> None:
        """Collect the op's outputs into ``args_handler``."""
        self.args_handler.parse_outputs(schema, outputs, is_factory=is_factory)

    def check_errors(self, func: Any, npu_stream: csan.StreamId) -> None:
        """Report the op to the event handler; print and raise the races it found."""
        handler = self.args_handler
        errors = self.event_handler._handle_kernel_launch(
            npu_stream,
            handler.dataptrs_read - handler.dataptrs_written,
            handler.dataptrs_written,
            handler.outputs,
            str(func._schema),
            handler.tensor_aliases,
            storage_dataptrs_accessed=handler.storage_dataptrs_accessed,
        )
        self._raise(errors)

    @staticmethod
    def _raise(errors: List[csan.SynchronizationError]) -> None:
        if errors:
            for error in errors:
                print(error, file=sys.stderr)
            raise csan.CUDASanitizerErrors(errors)
