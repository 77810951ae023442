"""The data-parallel copies behind ``torch.cuda.comm`` / ``torch_npu.npu.comm``, for npu.

``torch.nn.parallel.comm`` (which ``torch.cuda.comm`` re-exports) calls
``torch._C._broadcast``, ``_broadcast_out``, ``_broadcast_coalesced``,
``_scatter``, ``_scatter_out``, ``_gather`` and ``_gather_out``, which a CPU
build of PyTorch does not have (they are CUDA's ``python_comm.cpp``). torch_npu
defines them in ``torch._C`` for npu tensors (its ``DataParallelComm.cpp``);
:func:`install` does the same with the functions of this module.

Every copy is an ordinary ``copy_``/``to`` with ``non_blocking=True``, so it is
queued, not waited for: a copy from npu:i to npu:j runs on npu:j's current
stream after the work queued on npu:i's current stream, and npu:i's stream
does not reuse the source before the copy read it (Copy.cpp). Copies from
pageable host memory wait for the host, as everywhere. ``scatter`` copies a
chunk on the caller's stream of that chunk's device when one is given.

Sparse COO tensors are broadcast as CUDA broadcasts them: ``broadcast`` copies
them whole (``copy_`` of sparse tensors copies their indices and values),
``broadcast_coalesced`` flattens the indices and the values of each chunk of
sparse tensors into two buffers (``_flatten_sparse_tensors``), broadcasts
those, and builds each device's tensors over views of them. Compressed
layouts (CSR, CSC, BSR, BSC), which CUDA's comm does not take either, and
sparse inputs of scatter and gather are refused with a clear error.
"""

from typing import List, Optional, Sequence, Tuple

import torch
from torch._utils import (
    _flatten_dense_tensors,
    _flatten_sparse_tensors,
    _reorder_tensors_as,
    _take_tensors,
    _unflatten_dense_tensors,
)

__all__: List[str] = []

_Streams = Optional[Sequence[Optional[torch.Stream]]]


def _is_npu(t: torch.Tensor) -> bool:
    return t.device.type == "npu"


def _shape(t: torch.Tensor) -> List[int]:
    # PyTorch's C++ messages print sizes as "[2, 5]".
    return list(t.shape)


def _npu(index: int) -> torch.device:
    return torch.device("npu", index)


def _check_dense(t: torch.Tensor, api: str) -> None:
    if t.layout != torch.strided:
        raise RuntimeError(
            f"{api}: {t.layout} tensors are not supported: npu has dense (strided) tensors only; "
            "convert with to_dense() first"
        )


def _check_dense_or_coo(t: torch.Tensor, api: str) -> None:
    if t.layout not in (torch.strided, torch.sparse_coo):
        raise RuntimeError(
            f"{api}: {t.layout} tensors are not supported: npu broadcasts strided and sparse_coo "
            "tensors; convert with to_sparse_coo() or to_dense() first"
        )


def _suggest_memory_format(t: torch.Tensor) -> torch.memory_format:
    # ATen's suggest_memory_format for the layouts gather keeps.
    if not t.is_contiguous():
        if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
            return torch.channels_last
        if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
            return torch.channels_last_3d
    return torch.contiguous_format


def _broadcast_out(tensor: torch.Tensor, out: List[torch.Tensor]) -> List[torch.Tensor]:
    _check_dense_or_coo(tensor, "broadcast")
    for i, o in enumerate(out):
        if not _is_npu(o):
            raise RuntimeError(
                f"Expected all output tensors to be NPU tensors, but output tensor at index {i} "
                f"has device '{o.device}'"
            )
        if o.shape != tensor.shape:
            raise RuntimeError(
                f"Expected all output tensors to have same shape as the source tensor {_shape(tensor)}, "
                f"but output tensor at index {i} has shape {_shape(o)}"
            )
    for o in out:
        o.copy_(tensor, non_blocking=True)
    return out


def _broadcast(tensor: torch.Tensor, devices: List[int]) -> List[torch.Tensor]:
    _check_dense_or_coo(tensor, "broadcast")
    source = tensor.get_device() if _is_npu(tensor) else -1
    for d in devices:
        if d < 0:
            raise RuntimeError(f"Expected non-negative device index, but got {d}")
    # The source's own device gets the source itself (no copy); every other
    # entry a copy of its own, as with CUDA (a device named twice gets two).
    results = [tensor if d == source else torch.empty_like(tensor, device=_npu(d)) for d in devices]
    _broadcast_out(tensor, [r for r, d in zip(results, devices) if d != source])
    return results


def _broadcast_coalesced(tensors: List[torch.Tensor], devices: List[int], buffer_size: int) -> List[List[torch.Tensor]]:
    if not devices:
        raise RuntimeError("broadcast_coalesced: expected at least one device, but got none")
    for i, t in enumerate(tensors):
        _check_dense_or_coo(t, "broadcast_coalesced")
        if t.get_device() != devices[0]:
            raise RuntimeError(
                f"All tensors must be on devices[0]: {devices[0]}, but tensor at index {i} is on {t.device}"
            )
    outputs: List[List[torch.Tensor]] = [list(tensors)] + [[] for _ in devices[1:]]
    for chunk in _take_tensors(tensors, buffer_size):
        # One flat buffer per chunk of one dtype and layout (two for sparse
        # tensors: indices, values): one copy per device instead of one per
        # tensor.
        with torch.npu.device(devices[0]):
            flat = _flatten_sparse_tensors(chunk) if chunk[0].is_sparse else (_flatten_dense_tensors(chunk),)
        copies = [_broadcast(f, devices) for f in flat]
        for i in range(1, len(devices)):
            if chunk[0].is_sparse:
                unflat = _unflatten_sparse(copies[0][i], copies[1][i], chunk)
            else:
                unflat = _unflatten_dense_tensors(copies[0][i], chunk)
            # `.data`: each result gets a version counter of its own, as with
            # CUDA (NOTE [ Version Counter in comm.*_coalesced ]).
            outputs[i].extend(t.data for t in unflat)
    # _take_tensors groups by dtype: put every list back in the input order.
    return [outputs[0]] + [list(_reorder_tensors_as(o, tensors)) for o in outputs[1:]]


def _unflatten_sparse(
    flat_indices: torch.Tensor, flat_values: torch.Tensor, like: Sequence[torch.Tensor]
) -> List[torch.Tensor]:
    r"""Sparse tensors of the sizes of ``like`` over views of the flat buffers,
    on the buffers' device (``torch._utils._unflatten_sparse_tensors`` builds
    them with ``Tensor.new``, on the device of ``like``)."""
    indices = _unflatten_dense_tensors(flat_indices, [t._indices() for t in like])
    values = _unflatten_dense_tensors(flat_values, [t._values() for t in like])
    return [
        torch.sparse_coo_tensor(i, v, t.size(), is_coalesced=t.is_coalesced(), check_invariants=False)
        for t, i, v in zip(like, indices, values)
    ]


def _stream_for(streams: _Streams, i: int, device: int) -> Optional[torch.Stream]:
    stream = streams[i] if streams is not None and i < len(streams) else None
    if stream is not None and stream.device_index != device:
        raise RuntimeError(
            f"Expected the device associated with the stream at index {i} (was {stream.device_index}) "
            f"to match the device supplied at that index (expected {device})"
        )
    return stream


def _scatter(
    tensor: torch.Tensor, devices: List[int], chunk_sizes: Optional[List[int]], dim: int, streams: _Streams
) -> List[torch.Tensor]:
    _check_dense(tensor, "scatter")
    if not devices:
        raise RuntimeError("Expected at least one device to scatter to")
    if chunk_sizes is not None and len(chunk_sizes) != len(devices):
        raise RuntimeError(
            "Expected devices and chunk_sizes to be of same length, but got "
            f"len(devices) = {len(devices)} and len(chunk_sizes) = {len(chunk_sizes)}"
        )
    if chunk_sizes is not None:
        chunks = list(tensor.split_with_sizes(list(chunk_sizes), dim))
    else:
        chunks = list(tensor.chunk(len(devices), dim))
    source = tensor.get_device() if _is_npu(tensor) else -1
    for i, chunk in enumerate(chunks):
        d = devices[i]
        if d == source:
            continue  # a view of the source (no copy)
        if d < 0:
            raise RuntimeError(f"Expected non-negative device index, but got {d}")
        with torch.npu.stream(_stream_for(streams, i, d)):
            chunks[i] = chunk.to(_npu(d), non_blocking=True)
    return chunks


def _scatter_out(tensor: torch.Tensor, out: List[torch.Tensor], dim: int, streams: _Streams) -> List[torch.Tensor]:
    _check_dense(tensor, "scatter")
    if not out:
        raise RuntimeError("Expected at least one output tensor to scatter to")
    dim = dim + tensor.dim() if dim < 0 else dim
    if not 0 <= dim < max(tensor.dim(), 1):
        raise IndexError(f"scatter: dim {dim} is out of range for a tensor of {tensor.dim()} dimensions")
    sizes = []
    for i, o in enumerate(out):
        if not _is_npu(o):
            raise RuntimeError(
                f"Expected all output tensors to be NPU tensors, but output tensor at index {i} "
                f"has device '{o.device}'"
            )
        expected = _shape(tensor)
        if o.dim() == tensor.dim():
            expected[dim] = o.size(dim)
        if _shape(o) != expected:
            raise RuntimeError(
                f"Output tensor at index {i} has incorrect shape: {_shape(o)}. Expected same shape "
                f"except for scatter dim {dim} as the source tensor: {_shape(tensor)}"
            )
        sizes.append(o.size(dim))
    if sum(sizes) != tensor.size(dim):
        raise RuntimeError(
            f"Total size for output tensors along scatter dim {dim} does not match the source tensor "
            f"size at dim {dim}. Expected {tensor.size(dim)}, but got total size {sum(sizes)}"
        )
    for i, (o, chunk) in enumerate(zip(out, tensor.split_with_sizes(sizes, dim))):
        with torch.npu.stream(_stream_for(streams, i, o.get_device())):
            o.copy_(chunk, non_blocking=True)
    return out


def _gathered_size(tensors: Sequence[torch.Tensor], dim: int) -> Tuple[int, List[int]]:
    r"""Checks the inputs of gather; returns the wrapped dim and the result's sizes."""
    if len(tensors) == 0:
        raise RuntimeError("Expected at least one tensor to gather from")
    first = tensors[0]
    dim = dim + first.dim() if dim < 0 else dim
    if not 0 <= dim < max(first.dim(), 1):
        raise IndexError(f"gather: dim {dim} is out of range for tensors of {first.dim()} dimensions")
    expected = _shape(first)
    total = 0
    for i, t in enumerate(tensors):
        if not _is_npu(t):
            raise RuntimeError(f"Expected all input tensors to be NPU tensors, but tensor at index {i} has device {t.device}")
        _check_dense(t, "gather")
        if t.dim() != len(expected):
            raise RuntimeError(
                "Expected all input tensors to have the same number of dimensions, but tensor at index "
                f"{i} has {t.dim()} dimensions, (expected {len(expected)})"
            )
        expected[dim] = t.size(dim)
        if _shape(t) != expected:
            raise RuntimeError(f"Input tensor at index {i} has invalid shape {_shape(t)}, but expected {expected}")
        total += t.size(dim)
    expected[dim] = total
    return dim, expected


def _gather_into(tensors: Sequence[torch.Tensor], out: torch.Tensor, dim: int) -> torch.Tensor:
    pieces = out.split_with_sizes([t.size(dim) for t in tensors], dim)
    for piece, t in zip(pieces, tensors):
        piece.copy_(t, non_blocking=_is_npu(out))
    return out


def _gather_out(tensors: List[torch.Tensor], out: torch.Tensor, dim: int) -> torch.Tensor:
    dim, expected = _gathered_size(tensors, dim)
    if _shape(out) != expected:
        raise RuntimeError(f"Expected out tensor to have shape {expected}, but got {_shape(out)}")
    return _gather_into(tensors, out, dim)


def _gather(tensors: List[torch.Tensor], dim: int, destination_index: Optional[int]) -> torch.Tensor:
    dim, expected = _gathered_size(tensors, dim)
    # The first input's layout, kept if every input has it (channels_last).
    formats = {_suggest_memory_format(t) for t in tensors}
    memory_format = formats.pop() if len(formats) == 1 else torch.contiguous_format
    if destination_index == -1:
        device = torch.device("cpu")
    elif destination_index is None:
        device = _npu(torch.npu.current_device())
    else:
        device = _npu(destination_index)
    out = torch.empty(expected, dtype=tensors[0].dtype, device=device, memory_format=memory_format)
    return _gather_into(tensors, out, dim)


_FUNCTIONS = {
    "_broadcast": _broadcast,
    "_broadcast_out": _broadcast_out,
    "_broadcast_coalesced": _broadcast_coalesced,
    "_scatter": _scatter,
    "_scatter_out": _scatter_out,
    "_gather": _gather,
    "_gather_out": _gather_out,
}


def install() -> None:
    r"""Define the functions ``torch.nn.parallel.comm`` calls in ``torch._C``, for npu.

    As torch_npu does. A CUDA build of PyTorch already has them (for CUDA
    tensors); they are left alone there, and ``torch.cuda.comm`` stays CUDA's.
    """
    for name, fn in _FUNCTIONS.items():
        if not hasattr(torch._C, name):
            setattr(torch._C, name, fn)
