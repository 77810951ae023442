"""make_graphed_callables: graphed versions of callables (forward and backward).

Same contract as ``torch.cuda.make_graphed_callables``: each callable is run a
few times on a side stream (warm-up), its forward is captured into one graph
and its backward (``torch.autograd.grad`` of the outputs that need grad) into
another, all sharing one memory pool; the result is an autograd function that
copies new inputs into the captured input tensors, replays the forward graph,
and in backward replays the backward graph.
"""

from typing import Any, Callable, List, Optional, Tuple

import torch
from torch.utils import _pytree as pytree

from . import utils as _utils

__all__ = ["make_graphed_callables"]


def _warm_up(callables: Tuple[Any, ...], sample_args: Tuple[Any, ...],
             surfaces: List[Tuple[torch.Tensor, ...]], iters: int, allow_unused: bool) -> None:
    # Lazy state (cuBLAS-like handles, autograd buffers) is created outside the capture.
    from .streams import Stream

    _utils.synchronize()
    with _utils.stream(Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(iters):
                outputs = pytree.tree_leaves(func(*args))
                needs_grad = tuple(o for o in outputs if o.requires_grad)
                if needs_grad:
                    torch.autograd.grad(
                        outputs=needs_grad,
                        inputs=tuple(i for i in surface if i.requires_grad),
                        grad_outputs=tuple(torch.empty_like(o) for o in needs_grad),
                        only_inputs=True,
                        allow_unused=allow_unused,
                    )
    _utils.synchronize()


def _capture_backward(bwd_graph: Any, surface: Tuple[torch.Tensor, ...],
                      static_outputs: Tuple[torch.Tensor, ...], pool: Any,
                      allow_unused: bool) -> Tuple[tuple, tuple]:
    from .graphs import graph

    static_grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs)
    needs_grad = tuple(o for o in static_outputs if o.requires_grad)
    grad_inputs = None
    if needs_grad:
        with graph(bwd_graph, pool=pool):
            grad_inputs = torch.autograd.grad(
                outputs=needs_grad,
                inputs=tuple(i for i in surface if i.requires_grad),
                grad_outputs=tuple(g for g in static_grad_outputs if g is not None),
                only_inputs=True,
                allow_unused=allow_unused,
            )
    static_grad_inputs: List[Optional[torch.Tensor]] = []
    index = 0
    for arg in surface:
        if arg.requires_grad and grad_inputs is not None:
            static_grad_inputs.append(grad_inputs[index])
            index += 1
        else:
            static_grad_inputs.append(None)
    return static_grad_outputs, tuple(static_grad_inputs)


def _graphed_function(fwd_graph: Any, bwd_graph: Any, params: Tuple[torch.Tensor, ...], n_user: int,
                      spec: Any, surface: Tuple[torch.Tensor, ...], static_outputs: Tuple[torch.Tensor, ...],
                      static_grad_outputs: tuple, static_grad_inputs: tuple) -> Callable[..., Any]:
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: torch.Tensor) -> Tuple[torch.Tensor, ...]:
            for i in range(n_user):
                if surface[i].data_ptr() != inputs[i].data_ptr():
                    surface[i].copy_(inputs[i])
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *grads: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
            for static, grad in zip(static_grad_outputs, grads):
                if static is not None and grad is not None and static.data_ptr() != grad.data_ptr():
                    static.copy_(grad)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_inputs)

    def functionalized(*user_args: Any) -> Any:
        flat = pytree.tree_leaves(user_args)
        out = Graphed.apply(*(tuple(flat) + params))
        return pytree.tree_unflatten(list(out), spec)

    return functionalized


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Optional[Tuple[int, int]] = None) -> Any:
    r"""Return graphed versions of ``callables`` (a callable or ``nn.Module``, or a tuple of them).

    Args:
        callables: what to graph; a tuple is captured in order, sharing one pool.
        sample_args: sample arguments (a tuple of tensors per callable).
        num_warmup_iters (int): warm-up runs before the capture.
        allow_unused_input (bool): passed to ``torch.autograd.grad``.
        pool (optional): memory pool to share (:func:`graph_pool_handle`).

    Returned callables replay their graphs; a graphed module's ``forward`` is
    replaced and runs the graphs while the module's training mode is the one it
    was captured in, the original forward otherwise.
    """
    from .graphs import NPUGraph, graph, graph_pool_handle

    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    flat_args = []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise RuntimeError("Modules must not have hooks registered at the time they are passed. "
                                   "However, registering hooks on modules after passing them through "
                                   "make_graphed_callables is allowed.")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError("In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, "
                                   "only parameters may be trainable. All buffers must have "
                                   "``requires_grad=False``.")
        flat = pytree.tree_leaves(args)
        if not all(isinstance(a, torch.Tensor) for a in flat):
            raise TypeError("In the beta API, sample_args for each callable must contain only Tensors. "
                            "Other types are not allowed.")
        flat_args.append(tuple(flat))

    params = [tuple(c.parameters()) if isinstance(c, torch.nn.Module) else () for c in callables]
    surfaces = [flat_args[i] + params[i] for i in range(len(callables))]
    fwd_graphs = [NPUGraph() for _ in callables]
    bwd_graphs = [NPUGraph() for _ in callables]
    mempool = graph_pool_handle() if pool is None else pool

    _warm_up(callables, sample_args, surfaces, num_warmup_iters, allow_unused_input)

    static_outputs, specs = [], []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            outputs = func(*args)
        flat_outputs, spec = pytree.tree_flatten(outputs)
        static_outputs.append(tuple(flat_outputs))
        specs.append(spec)

    grads = [None] * len(callables)
    for i in reversed(range(len(callables))):  # backward runs in reverse order
        grads[i] = _capture_backward(bwd_graphs[i], surfaces[i], static_outputs[i], mempool,
                                     allow_unused_input)

    results = []
    for i, func in enumerate(callables):
        graphed = _graphed_function(fwd_graphs[i], bwd_graphs[i], params[i], len(flat_args[i]), specs[i],
                                    surfaces[i], static_outputs[i], grads[i][0], grads[i][1])
        if isinstance(func, torch.nn.Module):
            def make_forward(module: torch.nn.Module, training: bool, graphed_fn: Callable[..., Any],
                             orig: Callable[..., Any]) -> Callable[..., Any]:
                def forward(*user_args: Any) -> Any:
                    return graphed_fn(*user_args) if module.training == training else orig(*user_args)
                return forward

            func.forward = make_forward(func, func.training, graphed, func.forward)
            results.append(func)
        else:
            results.append(graphed)
    return results[0] if just_one else tuple(results)
