"""NPU graphs: capture, replay, task groups, super-kernel scopes, host callbacks.

torch_npu's API (``torch_npu.npu`` and ``torch.npu``) over the simulator's
stream capture (docs/GRAPHS.md). Work issued on a capturing stream is recorded,
not run; :meth:`NPUGraph.replay` runs all of it again as one launch. Memory
allocated during a capture comes from the graph's private pool; random ops
draw new numbers at every replay; host reads inside a capture raise.

On an external stream (compat mode) every API here raises torch_npu's
refusal ("External NPU stream is not supported in <api>. This path requires a
torch_npu-managed stream."); full mode allows them (docs/EXTERNAL_STREAMS.md).
"""

import gc
import warnings
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch

from .. import _C
from . import utils as _utils
from ._super_kernel_options import check_super_kernel_options

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "is_current_stream_capturing",
    "launch_callback",
    "make_graphed_callables",
    "subscribe_report",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "unsubscribe_report",
]

_PoolHandle = Tuple[int, int]


def _check_managed(stream: Any, api: str) -> None:
    # torch_npu's refusal of external streams comes before any other check.
    _C._npu_checkManagedOnly(stream, api, False)


def is_current_stream_capturing() -> bool:
    r"""Return True if NPU graph capture is underway on the current NPU stream, False otherwise.

    Does not initialise the device if it was never used.
    """
    return _C._npu_isCurrentStreamCapturing()


def graph_pool_handle() -> _PoolHandle:
    r"""Return an opaque token representing the id of a graph memory pool.

    Pass it as ``pool=`` to several captures so that their graphs share one
    private pool (they must then be replayed in the order they were captured).
    """
    return _C._graph_pool_handle()


def graph_task_group_begin(stream: torch.Stream) -> None:
    r"""Inside a capture, start a task group on ``stream``: the ops issued on it
    until :func:`graph_task_group_end` can later be replaced with
    :func:`graph_task_update_begin` / :func:`graph_task_update_end`."""
    _check_managed(stream, "graph_task_group_begin")
    _C._graph_task_group_begin(stream)


def graph_task_group_end(stream: torch.Stream) -> Any:
    r"""End the task group begun on ``stream``; returns its handle."""
    _check_managed(stream, "graph_task_group_end")
    return _C._graph_task_group_end(stream)


def graph_task_update_begin(stream: torch.Stream, handle: Any) -> None:
    r"""After a capture, start replacing the task group ``handle``: the ops
    issued on ``stream`` until :func:`graph_task_update_end` are not run; they
    become the group's new tasks (same ops, new arguments) for later replays."""
    _check_managed(stream, "graph_task_update_begin")
    _C._graph_task_update_begin(stream, handle)


def graph_task_update_end(stream: torch.Stream) -> None:
    r"""Apply the update begun on ``stream``; raises if the ops issued do not
    match the task group (nothing changes then)."""
    _check_managed(stream, "graph_task_update_end")
    _C._graph_task_update_end(stream)


def _check_scope_name(scope_name: Optional[str]) -> None:
    if scope_name is not None and (not isinstance(scope_name, str) or not scope_name.strip()):
        raise RuntimeError("scope_name should be None or a non-empty string.")


def super_kernel_scope_begin(scope_name: Optional[str] = None) -> None:
    r"""Inside a capture, start a super-kernel scope on the current stream: the
    ops until :func:`super_kernel_scope_end` become one device task (one node of
    the graph). Outside a capture it does nothing."""
    _check_scope_name(scope_name)
    _C._npu_checkManagedOnly(None, "super_kernel_scope_begin", False)
    _C._super_kernel_scope_begin(scope_name)


def super_kernel_scope_end(scope_name: Optional[str] = None) -> None:
    r"""End the super-kernel scope of the current stream."""
    _check_scope_name(scope_name)
    _C._npu_checkManagedOnly(None, "super_kernel_scope_end", False)
    _C._super_kernel_scope_end(scope_name)


def _launch_host_func(stream: torch.Stream, fn: Callable[[Any], Any], user_data: Any) -> None:
    r"""torch_npu's host callback: ``fn(user_data)`` runs after the work queued on
    ``stream`` before it, and the stream's later work waits for it. Captured, it
    runs at every replay. An exception in ``fn`` is reported through
    ``sys.unraisablehook``; the stream goes on."""
    _C._launch_host_func(stream, fn, user_data)


def _launch_host_func_pending(stream: torch.Stream, fn: Callable[[Any], Any], user_data: Any) -> None:
    r"""As :func:`_launch_host_func`, but ``fn(user_data)`` is scheduled on the main
    interpreter thread when the stream reaches it; the stream does not wait."""
    _C._launch_host_func_pending(stream, fn, user_data)


def _subscribe_report(stream: torch.Stream) -> None:
    r"""torch_npu's report subscription for host callbacks on ``stream`` (kept for
    compatibility: the simulator runs callbacks without one)."""
    _C._subscribe_report(stream)


def _unsubscribe_report(stream: torch.Stream) -> None:
    r"""End the subscription of ``stream``, after its queued callbacks ran."""
    _C._unsubscribe_report(stream)


def launch_callback(callback: Callable[[], Any], stream: Optional[torch.Stream] = None) -> None:
    r"""Run ``callback()`` on the host in the order of ``stream`` (current if ``None``);
    the older name, on top of :func:`_launch_host_func`."""
    _check_managed(stream, "launch_callback")
    if not callable(callback):
        raise TypeError(f"launch_callback expects a callable, but got {type(callback).__name__}")
    target = stream if stream is not None else _utils.current_stream()
    _C._launch_host_func(target, lambda _: callback(), None)


def subscribe_report(stream: torch.Stream) -> None:
    r"""Alias of :func:`_subscribe_report`."""
    _check_managed(stream, "subscribe_report")
    _C._subscribe_report(stream)


def unsubscribe_report(stream: torch.Stream) -> None:
    r"""Alias of :func:`_unsubscribe_report`."""
    _check_managed(stream, "unsubscribe_report")
    _C._unsubscribe_report(stream)


# The stream sanitizer's view of captures and replays (torch_npu.npu._sanitizer sets it while
# enabled): captured ops do not run at capture, so it notes their accesses between
# capture_begin and capture_end and reports them at each replay.
_capture_observer: Optional[Any] = None


class NPUGraph(_C._NPUGraph):
    r"""Wrapper around an NPU graph.

    An instance captures once (:meth:`capture_begin` / :meth:`capture_end`, or
    :class:`graph`) and then :meth:`replay` runs the captured work again on the
    current stream. The graph owns a private memory pool (:meth:`pool`) holding
    the memory of the tensors the capture allocated; :meth:`reset` (or dropping
    the instance) destroys the graph and returns the pool.
    """

    def __new__(cls) -> "NPUGraph":
        return super().__new__(cls)

    def capture_begin(self, pool: Optional[_PoolHandle] = None, capture_error_mode: str = "global") -> None:
        r"""Begin capturing NPU work on the current stream.

        Typically, use :class:`~torch.npu.graph` or
        :func:`~torch.npu.make_graphed_callables` instead.

        Args:
            pool (optional): token from :func:`graph_pool_handle` or another graph's
                :meth:`pool`: this graph then shares that memory pool.
            capture_error_mode (str, optional): ``"global"``, ``"thread_local"`` or
                ``"relaxed"``: which threads may not make potentially unsafe calls
                (synchronous copies, device synchronize) while the capture lasts.
        """
        super().capture_begin(pool=pool, capture_error_mode=capture_error_mode)
        if _capture_observer is not None:
            _capture_observer.capture_begin(self)

    def capture_end(self) -> None:
        r"""End the capture on the current stream; :meth:`replay` may be called afterwards."""
        super().capture_end()
        if _capture_observer is not None:
            _capture_observer.capture_end(self)

    def replay(self) -> None:
        r"""Replay the NPU work captured by this graph on the current stream."""
        super().replay()
        if _capture_observer is not None:
            _capture_observer.replay(self)

    def reset(self) -> None:
        r"""Delete the graph currently held by this instance and return its memory pool."""
        super().reset()

    def begin_capture_to_if_node(self, pred: torch.Tensor) -> None:
        r"""Begin capturing the body of a conditional node (used by ``torch.cond`` under
        :class:`~torch_npu.npu._npugraph_conditional_nodes.NPUGraphCaptureControlFlowOpDispatchMode`).

        Adds an if node to this graph's capture at the current stream, which must
        record into the innermost capture of this graph, and makes a body stream
        current: the work captured until :meth:`end_capture_to_conditional_node`
        runs at a replay only when ``pred`` holds true at that point of the replay.
        The graph keeps ``pred`` alive until :meth:`reset`.

        Args:
            pred (Tensor): one-element ``torch.bool`` tensor on the capture's device.

        Raises:
            RuntimeError: no capture of this graph records on the current stream,
                or ``pred`` is not a one-element bool tensor of the capture's device.
        """
        super().begin_capture_to_if_node(pred)

    def end_capture_to_conditional_node(self) -> None:
        r"""End the innermost conditional body and make the stream current before it current again.

        Raises:
            RuntimeError: no body is open, or the body's capture failed (the graph's
                capture has then failed as well, and :meth:`capture_end` says so).
        """
        super().end_capture_to_conditional_node()

    def register_generator_state(self, generator: torch.Generator) -> None:
        r"""Deprecated, does nothing: generators are registered by their first random op in the capture.

        Kept for code written for torch_npu (or for CUDA graphs, where it was
        needed before PyTorch 2.4); warns as torch_npu does.
        """
        warnings.warn(
            "NPUGraph.register_generator_state() is deprecated, and will be removed in a future "
            "torch_npu release. It is now a no-op and can be safely removed from your code. "
            "Generator states are automatically registered when RNG ops first execute during "
            "graph capture.",
            DeprecationWarning,
            stacklevel=2,
        )

    def pool(self) -> _PoolHandle:
        r"""Return an opaque token representing the id of this graph's memory pool."""
        return super().pool()

    def super_kernel_optimize(self, optimize_options: Optional[Dict[str, Any]] = None,
                              debug_options: Optional[Dict[str, Any]] = None) -> None:
        r"""Ask for the captured graph to be compiled into super kernels (torch_npu's API).

        On Ascend hardware CANN fuses the graph's kernels into few large ones;
        replays give the same results, faster. The simulator runs every
        captured node as its own task and fuses nothing here (only
        :func:`super_kernel_scope_begin` scopes are fused): the call checks the
        options as torch_npu does and that a capture succeeded, and otherwise
        changes nothing.

        Args:
            optimize_options (dict, optional): ``preload_code``, ``split_mode``,
                ``stream_fusion``, ``constant_codegen``, ``auto_op_parallel``,
                ``early_start`` (int); ``opt_extend`` (str);
                ``dcci_before_kernel_start``, ``dcci_after_kernel_end``,
                ``dcci_disable_on_kernel``, ``ubuf_lock_ignore_kernel`` (lists of
                kernel names); ``aggressive_opt_strategies`` (dict of int
                ``event_breaker_bypass``, ``value_breaker_bypass``,
                ``task_breaker_bypass``).
            debug_options (dict, optional): ``debug_sync_all``,
                ``debug_op_exec_trace``, ``debug_cross_core_sync_check``,
                ``debug_per_op_max_core_num`` (int); ``debug_extend`` (str).

        Raises:
            RuntimeError: a bad option (its name, the expected type), or no
                successful capture yet.
        """
        check_super_kernel_options(optimize_options, debug_options)
        if not super()._has_graph_exec():
            raise RuntimeError(
                "Called NPUGraph::super_kernel_optimize without a preceding successful capture.")

    def enable_debug_mode(self) -> None:
        r"""Keep the graph for :meth:`debug_dump` (the simulator always keeps it)."""
        super().enable_debug_mode()

    def debug_dump(self, debug_path: str) -> None:
        r"""Write the graph as Graphviz DOT to ``debug_path`` (``dot -Tpng`` renders it).

        Warns, and writes nothing, without a preceding successful capture.
        """
        super().debug_dump(debug_path)

    @staticmethod
    def get_currently_capturing_graph() -> "NPUGraph":
        r"""Return the :class:`NPUGraph` whose capture the current stream records into.

        The current stream is the capture stream, or a stream forked into the
        capture (it waited on an event recorded in it). The object returned is
        the instance that called :meth:`capture_begin`.

        Raises:
            RuntimeError: the current stream is not capturing ("The current NPU
                stream is not currently capturing."; in the default external-stream
                mode also an external current stream), or it captures for no
                NPUGraph (a capture begun through the runtime or ACL API directly),
                or the capture belongs to a ``torch.accelerator.Graph``.
        """
        return _C._NPUGraph.get_currently_capturing_graph()

    def update(self, cpu_update_input: Any) -> None:
        r"""torch_npu's automatic update; needs ``auto_dispatch_capture``, which the
        simulator does not implement: use the task-group functions instead."""
        raise RuntimeError(
            "The current graph configuration does not support update,"
            "Try to capture by setting auto_dispatch_capture=True during capture"
        )


class graph:
    r"""Context manager that captures NPU work into an :class:`NPUGraph`.

    Synchronizes the device, collects garbage and empties the cache, makes
    ``stream`` current (a side stream shared by all ``graph`` objects if
    ``None``) and captures until exit.

    Args:
        npu_graph (NPUGraph): graph to capture into.
        pool (optional): memory pool to share (see :meth:`NPUGraph.capture_begin`).
        stream (torch.npu.Stream, optional): capture stream.
        capture_error_mode (str, optional): see :meth:`NPUGraph.capture_begin`.
    """

    default_capture_stream: Optional[torch.Stream] = None
    _default_capture_streams: Dict[int, torch.Stream] = {}

    def __init__(
        self,
        npu_graph: NPUGraph,
        pool: Optional[_PoolHandle] = None,
        stream: Optional[torch.Stream] = None,
        capture_error_mode: str = "global",
        auto_dispatch_capture: bool = False,
    ) -> None:
        if auto_dispatch_capture:
            raise RuntimeError("auto_dispatch_capture is not supported on the simulated NPU; "
                               "use graph_task_group_begin/end and graph_task_update_begin/end.")
        # One default capture stream per device (torch.cuda.graph keeps one for
        # the process, made on whichever device was current first: a later
        # capture on another device then records nothing). It is private to
        # graph capture, not a pool stream: torch.cuda.graph's comes from the
        # pool, so a user's Stream() could be it, and forking to it would fork
        # nothing (Note [StreamId assignment] in csrc/core/NPUStream.h).
        device = _utils.current_device()
        if device not in self.__class__._default_capture_streams:
            capture_stream = _C._npu_defaultCaptureStreamObject(device)
            self.__class__._default_capture_streams[device] = capture_stream
        self.__class__.default_capture_stream = self.__class__._default_capture_streams[device]
        self.pool = pool
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = _utils.stream(self.capture_stream)
        self.npu_graph = npu_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        _utils.synchronize()
        gc.collect()
        from .memory import empty_cache

        empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.npu_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *args: Any) -> None:
        try:
            self.npu_graph.capture_end()
        except Exception:
            # An exception leaving the block already says what went wrong; the
            # failed capture is its consequence, and raising that too would report
            # one error twice (torch.cuda.graph chains both). The capture is over.
            if args[0] is None:
                raise
        finally:
            self.stream_ctx.__exit__(*args)


from ._graphed_callables import make_graphed_callables  # noqa: E402
