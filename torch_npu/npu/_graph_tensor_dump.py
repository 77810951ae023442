"""torch_npu's graph debugging ops: print or save a tensor's contents at a point
of a stream's work, at every replay when captured.

- ``torch.ops.npu.print_npugraph_tensor(x, *, tensor_name=None)``
  (``torch_npu.print_npugraph_tensor``) prints ``"<name>=<tensor>, shape=(...),
  dtype=..."``;
- ``torch.ops.npu.save_npugraph_tensor(x, *, save_path=None, overwrite=False)``
  and its ``.tensor_list`` overload (``torch_npu.save_npugraph_tensor``) write
  ``torch.save`` files, named by torch_npu's rules (:func:`_save_path`).

Note [Dumping tensors in stream order]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On an npu tensor the op queues, on the current stream, a copy of the tensor
into a pinned host buffer of its own and then a host callback that prints or
saves that buffer. Both are ordinary stream work: eagerly they run when the
stream reaches them, and inside a capture they are recorded, so every replay
copies the tensor's contents at that point of the graph and prints or saves
them. The callback holds the stream (torch_npu's blocking host function), so
the next use of the buffer, a later replay's copy, waits until it was read:
each replay prints what it computed. (torch_npu copies on a side stream and
prints from a pending call, which the next replay can overtake.) The buffer
lives as long as the callback, which a captured graph keeps until it is
reset. A CPU tensor is printed or saved at once.
"""

import datetime
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch.fx.node import has_side_effect

from .. import _C

__all__ = ["print_npugraph_tensor", "save_npugraph_tensor"]

_counters: Dict[str, int] = {}
_counters_lock = threading.Lock()


def _save_path(save_path: Optional[str], device_index: Optional[int], overwrite: bool) -> str:
    r"""torch_npu's file name for a save: ``save_path`` (default
    ``tensor_<timestamp>.pt``; ``.pt`` added if it has no suffix) with
    ``_device_<i>`` for an npu tensor, then ``_<n>`` counting the saves made to
    that name in this process, unless ``overwrite``. Decided when the op is
    called (at capture for a captured op: every replay writes that file)."""
    if save_path is None:
        save_path = f"tensor_{datetime.datetime.now().strftime('%Y%m%d_%H%M%S_%f')}.pt"
    if not isinstance(save_path, str):
        raise TypeError(f"save_path must be str or None, but got {type(save_path).__name__}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be bool, but got {type(overwrite).__name__}")
    directory, filename = os.path.split(save_path)
    stem, suffix = os.path.splitext(filename)
    if not stem:
        raise ValueError(f"save_path must include a file name, but got {save_path!r}")
    suffix = suffix or ".pt"
    if device_index is not None:
        stem = f"{stem}_device_{device_index}"
    if not overwrite:
        key = os.path.join(directory, stem + suffix)
        with _counters_lock:
            index = _counters.get(key, 0)
            _counters[key] = index + 1
        stem = f"{stem}_{index}"
    return os.path.join(directory, stem + suffix)


def _format(tensor: torch.Tensor, tensor_name: Optional[str]) -> str:
    text = str(tensor) if tensor_name is None else f"{tensor_name}={tensor}"
    return f"{text}, shape={tuple(tensor.shape)}, dtype={tensor.dtype}"


def _managed_stream(device: torch.device, api: str) -> torch.Stream:
    r"""The current stream of ``device``, which the op's host callback will use:
    refused on an external stream in compat mode, before anything is queued or
    any file name is taken."""
    with torch.npu.device(device):
        stream = torch.npu.current_stream()
    _C._npu_checkManagedOnly(stream, api, False)
    return stream


def _in_stream_order(stream: torch.Stream, tensors: Sequence[torch.Tensor],
                     consume: Callable[[List[torch.Tensor]], None]) -> None:
    r"""Queues copies of ``tensors`` (npu, on ``stream``'s device) into pinned
    buffers and then ``consume(buffers)`` as a host callback, on ``stream``
    (Note [Dumping tensors in stream order])."""
    with torch.npu.device(stream.device):
        buffers = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
        for buffer, tensor in zip(buffers, tensors):
            buffer.copy_(tensor, non_blocking=True)
        _C._launch_host_func(stream, consume, buffers)


def _check_list(inputs: Any) -> torch.device:
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"input must be Tensor or TensorList, but got {type(inputs).__name__}")
    if len(inputs) == 0:
        raise ValueError("input tensor list must not be empty")
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("all elements in input tensor list must be Tensor")
    devices = {t.device for t in inputs}
    if len(devices) != 1:
        raise ValueError(f"all tensors in input tensor list must be on the same device, but got {sorted(map(str, devices))}")
    return inputs[0].device


def _print_impl(input: torch.Tensor, *, tensor_name: Optional[str] = None) -> None:
    if input.device.type == "cpu":
        print(_format(input, tensor_name), flush=True)
        return
    stream = _managed_stream(input.device, "print_npugraph_tensor")
    _in_stream_order(stream, [input], lambda held: print(_format(held[0], tensor_name), flush=True))


def _save_impl(input: torch.Tensor, *, save_path: Optional[str] = None, overwrite: bool = False) -> None:
    _save_tensors(input.device, [input], save_path, overwrite, as_list=False)


def _save_list_impl(input: List[torch.Tensor], *, save_path: Optional[str] = None,
                    overwrite: bool = False) -> None:
    _save_tensors(_check_list(input), list(input), save_path, overwrite, as_list=True)


def _save_tensors(device: torch.device, tensors: List[torch.Tensor], save_path: Optional[str],
                  overwrite: bool, as_list: bool) -> None:
    if device.type == "cpu":
        path = _save_path(save_path, None, overwrite)
        torch.save(tensors if as_list else tensors[0], path)
        return
    stream = _managed_stream(device, "save_npugraph_tensor")
    path = _save_path(save_path, stream.device.index, overwrite)

    def save(held: List[torch.Tensor]) -> None:
        # Unpinned copies: the buffers are reused by the next replay.
        copies = [t.clone() for t in held]
        torch.save(copies if as_list else copies[0], path)

    _in_stream_order(stream, tensors, save)


def _register() -> torch.library.Library:
    lib = torch.library.Library("npu", "FRAGMENT")
    lib.define("print_npugraph_tensor(Tensor input, *, str? tensor_name=None) -> ()")
    lib.define("save_npugraph_tensor(Tensor input, *, str? save_path=None, bool overwrite=False) -> ()")
    lib.define("save_npugraph_tensor.tensor_list(Tensor[] input, *, str? save_path=None, "
               "bool overwrite=False) -> ()")
    ops = {
        "print_npugraph_tensor": (_print_impl, torch.ops.npu.print_npugraph_tensor.default),
        "save_npugraph_tensor": (_save_impl, torch.ops.npu.save_npugraph_tensor.default),
        "save_npugraph_tensor.tensor_list": (_save_list_impl, torch.ops.npu.save_npugraph_tensor.tensor_list),
    }
    for name, (impl, op) in ops.items():
        lib.impl(name, impl, "PrivateUse1")
        lib.impl(name, impl, "CPU")
        torch.library.register_fake(f"npu::{name}", lambda *args, **kwargs: None, lib=lib)
        has_side_effect(op)  # no outputs: keeps torch.compile from dropping the call
    return lib


_library = _register()  # kept: the registrations live as long as the Library object


def print_npugraph_tensor(input: torch.Tensor, *, tensor_name: Optional[str] = None) -> None:
    r"""Print ``input`` when the current stream reaches this point (at every
    replay inside a captured graph): ``"<tensor_name>=<tensor>, shape=(...),
    dtype=..."``. See Note [Dumping tensors in stream order]."""
    torch.ops.npu.print_npugraph_tensor(input, tensor_name=tensor_name)


def save_npugraph_tensor(input: Any, *, save_path: Optional[str] = None, overwrite: bool = False) -> None:
    r"""``torch.save`` ``input`` (a tensor or a list of tensors on one device)
    when the current stream reaches this point (at every replay inside a
    captured graph), to the file :func:`_save_path` names."""
    if isinstance(input, torch.Tensor):
        torch.ops.npu.save_npugraph_tensor(input, save_path=save_path, overwrite=overwrite)
    else:
        _check_list(input)  # before dispatch, which cannot route an empty list
        torch.ops.npu.save_npugraph_tensor.tensor_list(input, save_path=save_path, overwrite=overwrite)
