"""TorchDynamo on npu: the device interface and how Dynamo traces npu streams.

``import torch_npu`` does not import ``torch._dynamo`` (seconds); it arranges for
:func:`_setup_dynamo` to run the moment a program imports it
(``torch_npu.utils._import_hooks``), as torch_npu's own lazy setup does.

Note [Npu streams in compiled code]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch 2.13's Dynamo models streams with objects passed into the graph by
index (``torch._dynamo.graph_bytecode_inputs``; index 0 is the caller's
current stream at each call) and the side-effecting ops ``torch.ops.streams.*``
(``wait_stream``, ``wait_event``, ``record_event``, ``synchronize_*``), which
run the real ``torch.Stream``/``torch.Event`` methods at run time. A stream
context (``with torch.cuda.stream(s):``) only annotates the nodes inside it
(``node.meta["custom"]["stream"]``), which Inductor's stream scheduling reads
and every other backend ignores: under ``backend="eager"`` or ``"aot_eager"``
the ops of the block would run on the caller's stream. Npu streams therefore
also switch the stream at run time: entering ``torch.npu.stream(s)`` puts
``torch.ops.streams.fork(previous, s)`` into the graph and leaving it
``torch.ops.streams.join(s, previous)`` (PyTorch's own ops, which call
``torch.accelerator.set_stream``), so every backend runs the block's ops on
``s``, in program order with the stream ops around them; ``with s:`` does
the same for an npu stream ``s``. The rest is
registration: ``torch.npu.stream`` / ``current_stream`` are traced like
``torch.cuda``'s (rather than inlined into torch_npu's Python and its C
calls), and ``torch.npu.Stream`` / ``torch.npu.Event`` are constructed in the
graph like ``torch.cuda``'s. What Dynamo does not trace (``set_stream``,
``Stream.query``) is a graph break: it runs eagerly between graphs.
"""

import threading
from typing import Any, Callable, Optional

import torch

from ._import_hooks import run_after_import

__all__ = []

_setup_lock = threading.RLock()
_done: set = set()


def _once(step: Callable[[], None]) -> Callable[[], None]:
    """``step`` runs until it succeeds once; concurrent callers wait for it."""

    def run() -> None:
        with _setup_lock:
            if step.__name__ in _done:
                return
            step()
            _done.add(step.__name__)

    run.__name__ = step.__name__
    run.__doc__ = step.__doc__
    return run


@_once
def _dynamo_register_interface_for_device() -> None:
    r"""Register :class:`~torch_npu.utils._dynamo_device.NpuInterface` as Dynamo's
    interface for ``"npu"`` and ``"npu:<i>"`` (torch_npu's function; idempotent,
    thread-safe). Also lets Dynamo trace ``torch.npu.current_stream()``."""
    from torch._dynamo.device_interface import register_interface_for_device

    from ._dynamo_device import NpuInterface

    register_interface_for_device("npu", NpuInterface)
    # Up to torch_npu's maximum device count: the names exist before the
    # device count is known (the interface must not start the device).
    for i in range(32):
        register_interface_for_device(f"npu:{i}", NpuInterface)
    _register_current_stream_handler()


def _register_current_stream_handler() -> None:
    """torch.npu.current_stream traces as torch.accelerator.current_stream does."""
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    _trace_in_graph(torch.npu.current_stream)
    handlers = TorchInGraphFunctionVariable._get_handlers()
    handlers[torch.npu.current_stream] = handlers[torch.accelerator.current_stream]


def _trace_in_graph(fn: Callable[..., Any]) -> None:
    """Make Dynamo treat ``fn`` as a torch function it models (not inline it)."""
    from torch._dynamo import trace_rules
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    trace_rules.get_torch_obj_rule_map()[fn] = TorchInGraphFunctionVariable


def _fork(tx: Any, target: Any) -> int:
    """Puts the switch to ``target`` into the graph; returns the previous stream's index."""
    previous = tx.symbolic_stream_state.cur_stream(target.device).user_object_index
    tx.output.create_proxy("call_function", torch.ops.streams.fork,
                           (previous, target.user_object_index), {})
    return previous


def _join(tx: Any, target: Any, previous: int) -> None:
    """Puts the switch back from ``target`` to the stream ``previous`` into the graph."""
    tx.output.create_proxy("call_function", torch.ops.streams.join,
                           (target.user_object_index, previous), {})


def _npu_stream_context_variable() -> type:
    """The Dynamo variable of ``torch.npu.stream(s)`` (Note [Npu streams in compiled code])."""
    from torch._dynamo.variables.streams import StreamContextVariable

    class NpuStreamContextVariable(StreamContextVariable):
        """``torch.npu.stream(s)``: annotates like CUDA's and switches the stream at run time."""

        _previous_index: Optional[int] = None

        def enter(self, tx: Any, *args: Any) -> Any:
            self._previous_index = _fork(tx, self.get_stream())
            return super().enter(tx, *args)

        def exit(self, tx: Any, *args: Any) -> Any:
            result = super().exit(tx, *args)
            _join(tx, self.get_stream(), self._previous_index)
            return result

        def python_type(self) -> type:
            return torch.npu.StreamContext

    return NpuStreamContextVariable


def _switch_npu_streams_entered_directly() -> None:
    """``with s:`` for an npu stream ``s`` switches streams as torch.npu.stream(s) does.

    Dynamo's StreamVariable is its own context manager and only annotates; its
    enter/exit gain the run-time switch for npu streams, and stay as they are
    for every other device.
    """
    from torch._dynamo.variables.streams import StreamVariable

    enter, exit_ = StreamVariable.enter, StreamVariable.exit

    def npu_enter(self: Any, tx: Any, *args: Any) -> Any:
        if self.device.type == "npu":
            self._npu_previous_index = _fork(tx, self)
        return enter(self, tx, *args)

    def npu_exit(self: Any, tx: Any, *args: Any) -> Any:
        result = exit_(self, tx, *args)
        if self.device.type == "npu":
            _join(tx, self, self._npu_previous_index)
        return result

    StreamVariable.enter, StreamVariable.exit = npu_enter, npu_exit


@_once
def _register_stream_tracing() -> None:
    """torch.npu.stream, torch.npu.Stream and torch.npu.Event in compiled code."""
    from torch._dynamo.variables.ctx_manager import NullContextVariable
    from torch._dynamo.variables.streams import StreamVariable
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    context_variable = _npu_stream_context_variable()

    def handle_npu_stream(self: Any, tx: Any, stream: Any = None) -> Any:
        if stream is None or stream.is_python_constant() and stream.as_python_constant() is None:
            return NullContextVariable()  # torch.npu.stream(None) changes nothing
        if not isinstance(stream, StreamVariable):
            from torch._dynamo.exc import unimplemented

            unimplemented(
                gb_type="torch.npu.stream of a non-stream",
                context=str(stream),
                explanation="torch.npu.stream expects a torch.npu.Stream (or None).",
                hints=["Pass a torch.npu.Stream."],
            )
        return context_variable(stream)

    _trace_in_graph(torch.npu.stream)
    TorchInGraphFunctionVariable._get_handlers()[torch.npu.stream] = handle_npu_stream
    _switch_npu_streams_entered_directly()
    in_graph = UserDefinedClassVariable._in_graph_classes()  # a cached, mutable set
    in_graph.update((torch.npu.Stream, torch.npu.Event))


@_once
def _route_inductor_npu_graphs() -> None:
    """torch.compile's default backend sends graphs over npu tensors to torch_npu._inductor."""
    wrapper = torch._TorchCompileInductorWrapper
    compile_for_cpu_and_cuda = wrapper.__call__

    def __call__(self: Any, model_: Any, inputs_: Any, *, config_patches: Any = None) -> Any:
        import torch_npu._inductor as npu_inductor

        if not npu_inductor.is_npu_graph(inputs_):
            return compile_for_cpu_and_cuda(self, model_, inputs_, config_patches=config_patches)
        return npu_inductor.compile_fx_npu(
            model_, inputs_, config_patches={**self.config, **(config_patches or {})},
            compile_region_name=self.name)

    wrapper.__call__ = __call__


def _setup_dynamo() -> None:
    r"""Everything Dynamo needs for npu (idempotent, thread-safe)."""
    _dynamo_register_interface_for_device()
    _register_stream_tracing()
    _route_inductor_npu_graphs()
    from ._dynamo_npugraphs import register_npugraphs_backend

    register_npugraphs_backend()


def npugraph_mark_step_begin() -> None:
    r"""torch_npu's ``torch.compiler.npugraph_mark_step_begin()``: the outputs of
    earlier calls of functions compiled with ``backend="npugraphs"`` or
    ``mode="reduce-overhead"`` are no longer read, so the next calls may reuse
    their memory (Note [Compiled functions replayed as NPU graphs]). Does not
    import Dynamo. Thread-safe."""
    from ..npu._graph_runner import mark_step_begin  # imported on first use

    mark_step_begin()


def _install() -> None:
    r"""Run :func:`_setup_dynamo` when ``torch._dynamo`` is imported (now if it is)."""
    run_after_import("torch._dynamo", _setup_dynamo)
    torch.compiler.npugraph_mark_step_begin = npugraph_mark_step_begin
