"""torch.compile's default backend (Inductor) for npu graphs.

Note [Compiled npu graphs run as stream tasks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The simulated NPU computes on the CPU and its memory is host memory, so the
code Inductor generates for the CPU (C++ kernels, ATen fallbacks, a Python
wrapper) is also right for npu data, if it runs where the device would: in
the order of the stream. Inductor's own per-device code generation has no
such notion for a CPU-like device (its CPU path assumes ``device.type ==
"cpu"`` in many places, its GPU path assumes Triton), so the npu backend
works one level up:

1. :func:`compile_fx_npu` is Inductor's ``compile_fx`` with our inner
   compiler. AOTAutograd, decompositions and the forward/backward partition
   stay PyTorch's; each resulting graph (forward, backward, or inference)
   reaches :func:`_compile_graph`.
2. The graph is rewritten to the CPU (every ``torch.device('npu…')`` argument
   becomes ``cpu``), fake-propagated over CPU example inputs, and compiled by
   Inductor's ``compile_fx_inner`` as a CPU graph.
3. At each call, the outputs that live on npu are allocated on the host
   thread by the caching allocator (on the current stream), and the whole
   compiled graph is queued as **one task** on the current stream of the
   graph's device (``_C._npu_launchHostTask``). The task runs the compiled CPU
   graph over CPU aliases of the npu inputs (``_host_memory.host_alias``) and
   copies its results into the outputs' memory. The host returns at once, as
   after any op: the work before the call finishes first and the work after
   it waits for it, on every stream that synchronizes with this one. An
   exception in the task is a failure of the stream, reported by its next
   synchronize (Note [Task failure rule]).

What that costs and what it refuses:

- The task holds the GIL while it runs (the compiled wrapper is Python); the
  host's waits release it, as for every host callback (Note [Host callbacks]).
- One copy per output (Inductor allocates its outputs itself).
- The task declares no memory accesses: the race detector (NPU_SIM_RACECHECK)
  does not see them, and it neither checks nor spreads poisoned inputs
  (Note [Poisoned memory]); an input poisoned by an earlier failure is read as
  it is. A failure of the task itself is reported like any task's.
- Output shapes must be known at the call: sizes that are expressions of
  the inputs' sizes are evaluated from the arguments; a graph whose output
  size depends on data (unbacked symbols) runs on the host after a
  synchronize of the stream (counted nowhere else, slower, still in order).
- Under ``mode="reduce-overhead"`` the task graph is wrapped in an
  ``NPUGraphRunner`` and replayed as an NPU graph (Note [Compiled functions
  replayed as NPU graphs] in ``torch_npu/npu/_graph_runner.py``); the task,
  captured once, runs at every replay, so it passes the compiled graph a copy
  of its argument list (a boxed graph empties the list it gets).
- Stream and event operations inside the compiled region
  (``torch.ops.streams.*``) and graphs over two npu devices are refused with
  an error that says what to do: a single task cannot switch streams.
"""

from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch
import torch.fx

from .. import _C
from ._host_memory import host_alias

__all__ = ["compile_fx_npu", "is_npu_graph"]


def is_npu_graph(example_inputs: Sequence[Any]) -> bool:
    r"""True if any example input is an npu tensor (the graph is compiled for npu)."""
    return any(isinstance(t, torch.Tensor) and t.device.type == "npu" for t in example_inputs)


def compile_fx_npu(model: torch.fx.GraphModule, example_inputs: Sequence[Any],
                   **kwargs: Any) -> Callable[..., Any]:
    r"""Inductor's ``compile_fx`` for a Dynamo graph over npu tensors
    (Note [Compiled npu graphs run as stream tasks]); ``kwargs`` go to ``compile_fx``."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(model, example_inputs, inner_compile=_compile_graph, **kwargs)


def _graph_devices(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> List[torch.device]:
    devices = {t.device for t in example_inputs if isinstance(t, torch.Tensor)}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            devices.add(value.device)
    return sorted((d for d in devices if d.type == "npu"), key=str)


def _check_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> torch.device:
    """The graph's npu device; raises for what a single stream task cannot run."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and getattr(target, "namespace", None) == "streams":
            raise RuntimeError(
                f"torch.compile's default backend (inductor) on npu cannot run the stream "
                f"operation {target} inside a compiled graph: npu graphs run as one task on one "
                "stream. Move stream and event calls (torch.npu.stream, wait_stream, "
                "Event.record) out of the compiled function, or compile it with "
                "backend='aot_eager' or 'eager', which run them in the graph."
            )
    devices = _graph_devices(gm, example_inputs)
    if len(devices) != 1:
        raise RuntimeError(
            f"torch.compile's default backend (inductor) on npu compiles graphs of one npu "
            f"device, but this graph uses {[str(d) for d in devices] or 'none'}. Compile the "
            "work of each device separately, or use backend='aot_eager'."
        )
    device = devices[0]
    return device if device.index is not None else torch.device("npu", torch.npu.current_device())


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    if isinstance(value, str) and value.split(":")[0] == "npu":
        return "cpu"
    return value


def _rewrite_to_cpu(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, _to_cpu)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, _to_cpu)
    gm.recompile()


def _cpu_example_inputs(example_inputs: Sequence[Any]) -> Tuple[List[Any], Any]:
    """CPU twins of the npu example inputs, in their fake mode (and that mode)."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode()
    cpu_inputs: List[Any] = []
    with fake_mode:
        for t in example_inputs:
            if isinstance(t, torch.Tensor) and t.device.type == "npu":
                cpu_inputs.append(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                                      device="cpu", requires_grad=False))
            else:
                cpu_inputs.append(t)
    return cpu_inputs, fake_mode


def _output_values(gm: torch.fx.GraphModule) -> List[Any]:
    """The graph's outputs as fake values (or constants), before the rewrite."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    (results,) = output.args
    return [r.meta.get("val") if isinstance(r, torch.fx.Node) else r for r in results]


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                   **kwargs: Any) -> Callable[[List[Any]], List[Any]]:
    """Inductor's inner compiler for one npu graph (boxed calling convention)."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    device = _check_graph(gm, example_inputs)
    outputs = _output_values(gm)
    graphs = _npu_graph_options(gm, kwargs)
    cpu_inputs, fake_mode = _cpu_example_inputs(example_inputs)
    _rewrite_to_cpu(gm)
    FakeTensorProp(gm, fake_mode).propagate_dont_convert_inputs(*cpu_inputs)
    compiled = compile_fx_inner(gm, cpu_inputs, **kwargs)
    task_graph = _StreamTaskGraph(compiled, device, list(example_inputs), outputs)
    if graphs is None:
        return task_graph
    from ..npu._graph_runner import NPUGraphRunner

    return NPUGraphRunner(task_graph, **graphs)


def _npu_graph_options(gm: torch.fx.GraphModule, kwargs: Dict[str, Any]) -> Any:
    """NPUGraphRunner's arguments if the graph is to be replayed as an NPU graph
    (``mode="reduce-overhead"``: Inductor's ``cudagraphs`` flag), else None.
    Inductor's CPU compilation itself never uses CUDA graphs."""
    from torch._inductor.utils import BoxedBool

    from ..npu._graph_runner import graph_options

    wanted = bool(kwargs.get("cudagraphs"))
    kwargs["cudagraphs"] = BoxedBool(False)
    if not wanted:
        return None
    backward = bool(kwargs.get("is_backward"))
    # A backward's "static" inputs are saved activations, which change address
    # here (Note [Compiled functions replayed as NPU graphs]).
    static = () if backward else tuple(kwargs.get("static_input_idxs") or ())
    kind = "backward" if backward else "inference" if kwargs.get("is_inference") else "forward"
    return dict(static_input_idxs=static, name=f"the {kind} graph", **graph_options(gm))


class _Unbound(Exception):
    """An output size that the arguments do not determine."""


class _StreamTaskGraph:
    r"""A compiled CPU graph called on npu tensors as a task of the current stream."""

    def __init__(self, compiled: Callable[[List[Any]], Any], device: torch.device,
                 example_inputs: List[Any], outputs: List[Any]) -> None:
        # AOTAutograd passes one list of arguments. An instance attribute, so
        # that wrappers that copy __dict__ (torch._dynamo.disable) keep it.
        self._boxed_call = True
        self._compiled = compiled
        self._device = device
        self._example_inputs = example_inputs
        self._outputs = outputs

    def __call__(self, args: List[Any]) -> List[Any]:
        try:
            env = self._bind(args)
            outputs = [self._allocate(value, env) for value in self._outputs]
        except _Unbound:
            return self._run_on_host(args)
        inputs = [host_alias(a) for a in args]
        results = [host_alias(o) for o in outputs]
        args.clear()  # the boxed convention: the task holds what it needs

        def task(_: Any) -> None:
            # A copy of the list: the compiled graph empties the list it gets
            # (boxed convention), and a task captured into an NPU graph runs
            # again at every replay.
            for result, value in zip(results, self._compiled(list(inputs))):
                if isinstance(result, torch.Tensor):
                    result.copy_(value)

        stream = torch.npu.current_stream(self._device)
        _C._npu_launchHostTask(stream, task, None)
        if any(isinstance(o, torch.Tensor) and o.device.type == "cpu" for o in outputs):
            stream.synchronize()  # a CPU output is read by the host at once
        return outputs

    def _bind(self, args: List[Any]) -> Dict[Any, int]:
        """Values of the example inputs' size symbols in this call's arguments."""
        env: Dict[Any, int] = {}

        def bind(symbolic: Any, actual: Any) -> None:
            if isinstance(symbolic, torch.SymInt):
                expr = symbolic.node.expr
                if expr.is_Symbol:
                    env[expr] = int(actual)

        for example, arg in zip(self._example_inputs, args):
            if isinstance(example, torch.Tensor):
                for s, a in zip(example.shape, arg.shape):
                    bind(s, a)
                for s, a in zip(example.stride(), arg.stride()):
                    bind(s, a)
                bind(example.storage_offset(), arg.storage_offset())
            else:
                bind(example, arg)
        return env

    @staticmethod
    def _evaluate(value: Any, env: Dict[Any, int]) -> int:
        if not isinstance(value, torch.SymInt):
            return int(value)
        expr = value.node.expr
        result = expr.xreplace(env) if hasattr(expr, "xreplace") else expr
        try:
            return int(result)
        except TypeError:  # free symbols left: the arguments do not determine it
            raise _Unbound(str(value)) from None

    def _allocate(self, value: Any, env: Dict[Any, int]) -> Any:
        if not isinstance(value, torch.Tensor):
            return self._evaluate(value, env) if isinstance(value, torch.SymInt) else value
        size = [self._evaluate(s, env) for s in value.shape]
        stride = [self._evaluate(s, env) for s in value.stride()]
        device = self._device if value.device.type == "npu" else value.device
        return torch.empty_strided(size, stride, dtype=value.dtype, device=device)

    def _run_on_host(self, args: List[Any]) -> List[Any]:
        """Data-dependent output sizes: wait for the stream, compute, copy back."""
        torch.npu.current_stream(self._device).synchronize()
        inputs = [host_alias(a) for a in args]
        results = self._compiled(inputs)
        return [r.to(self._device) if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor)
                and o.device.type == "npu" else r for r, o in zip(results, self._outputs)]
