"""Random ops on npu in ``torch.compile``'s recomputed graphs (torch_npu's ``utils._inductor``).

When AOTAutograd recomputes a checkpointed region in the backward pass
(``torch.utils.checkpoint`` under ``torch.compile``), its partitioner wraps each
random op of the region in two higher-order ops of
:mod:`torch._prims.rng_prims`: ``run_and_save_rng_state`` in the forward graph
(returns the generator state before the op, and the op's result) and
``run_with_rng_state`` in the backward graph (runs the op again from that
state), so the recomputed dropout mask is the forward's. PyTorch implements
both for cpu, cuda, hpu and xpu only and raises ``AssertionError: Backend not
supported for npu`` otherwise; this module adds npu, with the npu generator
of the tensors' device.

The ops dispatch by device in three places, each of which PyTorch binds to
its own device table: the ``BackendSelect`` kernel, the fake-tensor kernel
and, for ``run_and_save_rng_state``, the tracing (proxy mode) kernel. Each is
wrapped so that npu arguments take the npu implementation and every other
device keeps PyTorch's. The wrapping waits for :mod:`torch._prims.rng_prims`
to be imported (``torch_npu.utils._import_hooks``; ``import torch`` imports
it today, so in practice the wrapping happens at ``import torch_npu``).

Not covered: ``torch._functorch.config.functionalize_rng_ops`` (philox-based
stateless random ops), which PyTorch supports on CUDA only
(``CUDARngStateHelper``), and which raises "CUDA not available" on cpu too.
"""

from typing import Any, Callable, Dict, Optional

import torch

from ._import_hooks import run_after_import

__all__: list = []

_RNG_PRIMS = "torch._prims.rng_prims"


def _npu_device_of(args: tuple, kwargs: Dict[str, Any]) -> Optional[torch.device]:
    """The npu device the op runs on, as ``rng_prims.get_device`` decides the
    device type: its ``device=`` keyword, else its first tensor argument."""
    device = kwargs.get("device")
    if device is not None:
        device = torch.device(device)
    else:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    return device if device is not None and device.type == "npu" else None


def _generator_device(device: torch.device) -> int:
    return device.index if device.index is not None else torch.npu.current_device()


def _run_and_save_rng_state_npu(op: Callable, *args: Any, **kwargs: Any) -> tuple:
    device = _generator_device(_npu_device_of(args, kwargs))
    return torch.npu.get_rng_state(device), op(*args, **kwargs)


def _run_with_rng_state_npu(rng_state: torch.Tensor, op: Callable, *args: Any, **kwargs: Any) -> Any:
    device = _generator_device(_npu_device_of(args, kwargs))
    current = torch.npu.get_rng_state(device)
    torch.npu.set_rng_state(rng_state.cpu(), device)
    try:
        return op(*args, **kwargs)
    finally:
        torch.npu.set_rng_state(current, device)


def _npu_first(npu_impl: Callable, other_impl: Callable, leading: int) -> Callable:
    """A kernel that runs ``npu_impl`` for npu arguments, else ``other_impl``;
    ``leading`` arguments (the mode, the rng state) precede the op."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        op_args = args[leading + 1:]
        if _npu_device_of(op_args, kwargs) is not None:
            return npu_impl(*args, **kwargs)
        return other_impl(*args, **kwargs)

    return kernel


def _traced_run_and_save(mode: Any, op: Callable, *args: Any, **kwargs: Any) -> Any:
    """The proxy-mode kernel of ``run_and_save_rng_state`` for npu: run it, then
    record the call in the traced graph with the real outputs' proxies."""
    from torch.fx.experimental.proxy_tensor import track_tensor_tree
    from torch.utils import _pytree as pytree

    from torch._prims import rng_prims

    out = _run_and_save_rng_state_npu(op, *args, **kwargs)
    proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, (op, *args))
    proxy_kwargs = pytree.tree_map(mode.tracer.unwrap_proxy, kwargs)
    out_proxy = mode.tracer.create_proxy(
        "call_function", rng_prims.run_and_save_rng_state, proxy_args, proxy_kwargs)
    return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)


def _install() -> None:
    from torch._C import DispatchKey
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

    save = rng_prims.run_and_save_rng_state
    replay = rng_prims.run_with_rng_state
    if getattr(save, "_npu_installed", False):
        return
    save.py_impl(DispatchKey.PrivateUse1)(_run_and_save_rng_state_npu)
    replay.py_impl(DispatchKey.PrivateUse1)(_run_with_rng_state_npu)
    for hop, npu_impl, leading in ((save, _run_and_save_rng_state_npu, 0),
                                   (replay, _run_with_rng_state_npu, 1)):
        select = hop.py_kernels[DispatchKey.BackendSelect]
        hop.py_kernels[DispatchKey.BackendSelect] = _npu_first(npu_impl, select, leading)
        hop._dispatch_cache.clear()
    # Under fake tensors the state is read from the real generator, as
    # PyTorch's own kernels do for cpu and cuda; run_with_rng_state's fake
    # kernel never touches a generator and needs nothing.
    registered_hop_fake_fns[save] = _npu_first(
        _run_and_save_rng_state_npu, registered_hop_fake_fns[save], 0)
    traced = save.python_key_table[ProxyTorchDispatchMode]
    save.python_key_table[ProxyTorchDispatchMode] = _npu_first(_traced_run_and_save, traced, 1)
    save._dispatch_cache.clear()
    save._npu_installed = True


run_after_import(_RNG_PRIMS, _install)
