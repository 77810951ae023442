"""Compiled functions replayed as NPU graphs (``torch.compile(backend="npugraphs")``,
``mode="reduce-overhead"``).

Note [Compiled functions replayed as NPU graphs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
:class:`NPUGraphRunner` wraps one compiled function (a forward, backward or
inference graph of AOTAutograd, boxed calling convention). For each call
*signature* (the sizes, strides, storage offsets and dtypes of its tensor
arguments, the values of the others, and the addresses of its static
arguments: parameters and buffers) it keeps *recordings*: an
:class:`~torch_npu.npu.NPUGraph` captured from one call, with its own memory
pool, a placeholder per non-static tensor argument, and the outputs.

- The first call of a signature runs the function as it is (a warm-up, so
  that lazy initialisation is not captured); the second records; later calls
  replay. A call copies its non-static tensor arguments into the placeholders
  (the bytes of each argument's extent, so any layout works), replays the graph on the
  current stream and copies back the arguments the graph mutates. All of it
  is stream-ordered: the host does not wait.
- **A replay never overwrites a tensor the program can still read.** The
  caller gets new tensors over the recording's output memory: over a new
  alias of each output storage (Note [Storage aliases] in
  csrc/core/StorageAlias.h), shared by the views of that storage. A
  recording is replayed only when none of the aliases it handed out is alive
  (a tensor, a view, or a queued op holding it). An alias keeps the memory
  alive, so ``torch._dynamo.reset()`` cannot free what a program still
  reads, and it carries the poison of a failed replay (Note [Poisoned
  memory]): reading an output of a replay whose op failed raises that error. If every recording
  of the signature is busy, one more is recorded; past
  ``torch._inductor.config.triton.cudagraph_unexpected_rerecord_limit``
  recordings of one function, calls run without a graph, and a warning says
  why, once. ``torch.compiler.npugraph_mark_step_begin()`` declares the
  outputs of earlier calls dead: the next calls may reuse their memory, and
  reading them afterwards reads newer results.
- Outputs that are views of an argument are rebuilt over the caller's
  argument, not over its placeholder, so they alias what they alias eagerly.
- A replay waits for the recording's previous replay (an event), so two
  threads calling one function on two streams do not race on its memory.
- What cannot be captured (a host read such as ``.item()``, an output size
  that depends on data, a CPU tensor) fails the capture; the function then
  runs without a graph from then on, with a warning that gives the reason.

``torch._dynamo.utils.counters["npugraphs"]`` counts ``warmup``, ``record``,
``replay`` and ``eager`` (calls that ran without a graph).

Where this differs from CUDA's and torch_npu's graph trees: every recording
has a pool of its own (more memory; no tree of recordings sharing one pool),
and arguments that are not parameters or buffers, saved activations included,
are copied into placeholders (a copy per argument and replay); in exchange an
output is never overwritten while it is alive, where graph trees overwrite it
at the next step and make reading it raise.
"""

import threading
import warnings
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .. import _C

__all__ = ["NPUGraphRunner", "graph_options", "mark_step_begin"]


_step = 0
_lock = threading.Lock()  # guards _step


def mark_step_begin() -> None:
    r"""Declare that the outputs of earlier calls of npugraph-compiled functions
    are no longer read: their memory may be reused by the next replays.

    torch_npu's ``torch.compiler.npugraph_mark_step_begin``; thread-safe.
    """
    global _step
    with _lock:
        _step += 1


def graph_options(gm: torch.fx.GraphModule) -> Dict[str, Any]:
    r"""What :class:`NPUGraphRunner` needs to know of the AOTAutograd graph it
    runs: ``mutated_input_idxs`` and ``skip_reason``. Call it while the graph's
    nodes still carry their npu fake values."""
    return dict(mutated_input_idxs=_mutated_inputs(gm), skip_reason=_skip_reason(gm))


def _skip_reason(gm: torch.fx.GraphModule) -> Optional[str]:
    """Why the graph cannot be replayed as an NPU graph (None if it can): it
    computes on a device other than one npu device."""
    devices: Dict[torch.device, str] = {}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            devices.setdefault(value.device, node.name)
    others = {d: n for d, n in devices.items() if d.type != "npu"}
    if others:
        device, node = next(iter(others.items()))
        return (f"it computes on {device} (node {node}); an NPU graph replays npu work only, "
                "so move those tensors to npu")
    if len(devices) > 1:
        return f"it uses several devices ({', '.join(map(str, devices))})"
    return None


def _mutated_inputs(gm: torch.fx.GraphModule) -> Optional[Sequence[int]]:
    """Indices of the graph's inputs that it writes to (None if unknown)."""
    from torch._dynamo.backends.cudagraphs import find_input_mutations

    try:
        return sorted(find_input_mutations(gm.graph))
    except (KeyError, AttributeError, RuntimeError):  # a node without a fake value
        return None


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters["npugraphs"]


def _rerecord_limit() -> int:
    from torch._inductor import config

    return int(config.triton.cudagraph_unexpected_rerecord_limit)


def _signature(args: Sequence[Any], static: frozenset) -> Tuple[Hashable, ...]:
    key: List[Hashable] = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.layout != torch.strided:  # refused at its warm-up
            key.append((type(a), a.device, a.layout))
        elif isinstance(a, torch.Tensor):
            key.append((type(a), a.device, a.dtype, tuple(a.shape), a.stride(),
                        a.storage_offset(), a.data_ptr() if i in static else None))
        elif isinstance(a, (int, float, bool, str, type(None), torch.device, torch.dtype)):
            key.append((type(a), a))
        else:
            key.append((type(a), id(a)))
    return tuple(key)


def _unsupported_argument(args: Sequence[Any]) -> Optional[str]:
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            continue
        if a.device.type != "npu":
            return f"argument {i} is a {a.device.type} tensor (only npu tensors can be graph inputs)"
        if a.layout != torch.strided or type(a) not in (torch.Tensor, torch.nn.Parameter):
            return f"argument {i} is not a plain strided tensor ({type(a).__name__}, {a.layout})"
    return None


def _extent(t: torch.Tensor) -> int:
    """Elements of t's storage from its offset to its last element, inclusive."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def _region(t: torch.Tensor) -> torch.Tensor:
    """t's extent as a 1-D contiguous tensor over t's storage."""
    return t.as_strided((_extent(t),), (1,), t.storage_offset())


def _placeholder_like(t: torch.Tensor) -> torch.Tensor:
    """A new tensor with t's layout (offset included), for t's values."""
    base = torch.empty(t.storage_offset() + _extent(t), dtype=t.dtype, device=t.device)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class _Output:
    """How to rebuild one output of a replay: a constant, a view of argument
    ``index``, or a view of the recording's output storage ``index``."""

    def __init__(self, kind: str, index: int = -1, value: Any = None,
                 tensor: Optional[torch.Tensor] = None) -> None:
        self.kind = kind  # "value" | "argument" | "pool"
        self.index = index
        self.value = value
        if tensor is not None:  # its layout only: the recording holds the tensor
            self.meta = (tensor.dtype, tensor.device, tensor.storage_offset(),
                         tuple(tensor.shape), tensor.stride())

    def view_of(self, storage: Any) -> torch.Tensor:
        dtype, device, offset, size, stride = self.meta
        return torch.empty((0,), dtype=dtype, device=device).set_(storage, offset, size, stride)


class _Recording:
    """One captured call: its graph, pool, placeholders and outputs."""

    def __init__(self, graph: Any, inputs: List[Any], outputs: List[Any], mutated: Sequence[int],
                 static: frozenset, device: torch.device) -> None:
        self.graph = graph
        self.inputs = inputs  # placeholders (and the static arguments at capture)
        self.outputs = outputs  # holds the pool memory the outputs live in
        self.mutated = [i for i in mutated if i not in static and isinstance(inputs[i], torch.Tensor)]
        self.static = static
        self.device = device
        # The bytes each placeholder's argument is copied into (None: not copied).
        self.regions = [None if i in static or not isinstance(t, torch.Tensor) or t.numel() == 0
                        else _region(t) for i, t in enumerate(inputs)]
        self.handed_out: List[StorageWeakRef] = []
        self.step = _step
        self.last_replay = torch.npu.Event()
        self.replayed = False
        self.plan = self._plan_outputs()

    def _plan_outputs(self) -> List[_Output]:
        by_storage = {_storage_key(t): i for i, t in enumerate(self.inputs)
                      if isinstance(t, torch.Tensor)}
        self.pool_storages: List[torch.Tensor] = []  # one output per storage of the pool
        pool_index: Dict[int, int] = {}
        plan = []
        for out in self.outputs:
            if not isinstance(out, torch.Tensor):
                plan.append(_Output("value", value=out))
                continue
            key = _storage_key(out)
            if key in by_storage:
                plan.append(_Output("argument", by_storage[key], tensor=out))
                continue
            if key not in pool_index:
                pool_index[key] = len(self.pool_storages)
                self.pool_storages.append(out)
            plan.append(_Output("pool", pool_index[key], tensor=out))
        return plan

    def alive(self) -> bool:
        """Whether a storage handed out by the last replay is still referenced."""
        return any(not ref.expired() for ref in self.handed_out)

    def busy(self) -> bool:
        """Whether the last replay's outputs may still be read (no step marked since)."""
        return self.step == _step and self.alive()

    def replay(self, args: List[Any]) -> List[Any]:
        stream = torch.npu.current_stream(self.device)
        if self.replayed:
            stream.wait_event(self.last_replay)
        for arg, region in zip(args, self.regions):
            if region is not None and arg.data_ptr() != region.data_ptr():
                region.copy_(_region(arg))
        self.graph.replay()
        for i in self.mutated:
            if args[i].data_ptr() != self.inputs[i].data_ptr():
                args[i].copy_(self.inputs[i])
        self.last_replay.record(stream)
        self.replayed = True
        return self._hand_out(args)

    def _hand_out(self, args: List[Any]) -> List[Any]:
        storages = [_C._npu_storageAlias(t) for t in self.pool_storages]
        self.handed_out = [StorageWeakRef(s) for s in storages]
        self.step = _step
        results = []
        for out in self.plan:
            if out.kind == "value":
                results.append(out.value)
            elif out.kind == "argument":
                results.append(out.view_of(args[out.index].untyped_storage()))
            else:
                results.append(out.view_of(storages[out.index]))
        return results


class NPUGraphRunner:
    r"""A compiled function (boxed convention) run through NPU graphs
    (Note [Compiled functions replayed as NPU graphs]). Calls of one runner are
    serialized by a lock; the device work of its replays is stream-ordered.

    Args:
        fn: the compiled function; takes one list of arguments and returns a
            list or tuple of outputs.
        static_input_idxs: arguments whose address is the same at every call
            (parameters, buffers); they are not copied, and a new address is a
            new signature.
        mutated_input_idxs: arguments the function writes to (None: unknown,
            which runs every call without a graph).
        name: how warnings name the function.
        skip_reason: why the function cannot be graphed (see
            :func:`graph_options`); every call then runs it as it is.
    """

    def __init__(self, fn: Callable[[List[Any]], Any], static_input_idxs: Sequence[int] = (),
                 mutated_input_idxs: Optional[Sequence[int]] = (), name: str = "compiled function",
                 skip_reason: Optional[str] = None) -> None:
        self._boxed_call = True
        self._fn = fn
        self._static = frozenset(static_input_idxs)
        self._mutated = tuple(mutated_input_idxs or ())
        self._name = name
        self._lock = threading.Lock()
        self._warmed_up: set = set()
        self._recordings: Dict[Hashable, List[_Recording]] = {}
        self._count = 0
        self._disabled: Optional[str] = None
        if skip_reason is None and mutated_input_idxs is None:
            skip_reason = "the arguments it writes to could not be determined"
        if skip_reason is not None:
            self._disable(skip_reason)

    def __call__(self, args: List[Any]) -> Any:
        with self._lock:
            return self._call(args)

    def _call(self, args: List[Any]) -> Any:
        if self._disabled is not None:
            return self._run_eagerly(args)
        key = _signature(args, self._static)
        if key not in self._warmed_up:
            reason = _unsupported_argument(args)  # the signature has what it checks
            if reason is not None:
                self._disable(reason)
                return self._run_eagerly(args)
            result = self._fn(list(args))
            # Only a call that returned counts: an argument the function refuses
            # must not reach a capture (which would fail and turn graphs off).
            self._warmed_up.add(key)
            _counters()["warmup"] += 1
            return result
        recordings = self._recordings.setdefault(key, [])
        for recording in recordings:
            if not recording.busy():
                _counters()["replay"] += 1
                return recording.replay(args)
        if self._count >= _rerecord_limit():
            self._disable(f"it was recorded {self._count} times (torch._inductor.config.triton."
                          "cudagraph_unexpected_rerecord_limit), for new signatures or because "
                          "the outputs of earlier calls were still alive; drop or clone the "
                          "outputs, or call torch.compiler.npugraph_mark_step_begin()")
            return self._run_eagerly(args)
        recording = self._record(args)
        if recording is None:
            return self._run_eagerly(args)
        recordings.append(recording)
        _counters()["replay"] += 1
        return recording.replay(args)

    def _record(self, args: List[Any]) -> Optional[_Recording]:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)),
                      torch.device("npu"))
        if device.index is None:
            device = torch.device("npu", torch.npu.current_device())
        inputs = [a if (i in self._static or not isinstance(a, torch.Tensor)) else
                  _placeholder_like(a) for i, a in enumerate(args)]
        graph = torch.npu.NPUGraph()
        try:
            with torch.npu.device(device):
                # Placeholders' values do not matter for the capture, and its
                # side stream waits for the device (torch.npu.graph synchronizes).
                with torch.npu.graph(graph, pool=torch.npu.graph_pool_handle()), \
                        warnings.catch_warnings():
                    # A function of views only records no task, which is fine here.
                    warnings.filterwarnings("ignore", message="The NPU Graph is empty")
                    outputs = list(self._fn(list(inputs)))
        except Exception as error:  # what a graph cannot hold: the function runs as it is
            self._disable(f"its capture failed: {type(error).__name__}: {error}")
            return None
        self._count += 1
        _counters()["record"] += 1
        return _Recording(graph, inputs, outputs, self._mutated, self._static, device)

    def _run_eagerly(self, args: List[Any]) -> Any:
        _counters()["eager"] += 1
        return self._fn(list(args))

    def _disable(self, reason: str) -> None:
        self._disabled = reason
        self._warn(reason)

    def _warn(self, reason: str) -> None:
        warnings.warn(f"npugraphs: {self._name} runs without an NPU graph because {reason}.",
                      stacklevel=4)
