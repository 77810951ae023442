"""Memory history and snapshots of the npu caching allocator, in CUDA's format.

Re-exported by :mod:`torch_npu.npu.memory` (``_record_memory_history``,
``_snapshot``, ``_dump_snapshot``, ``memory_snapshot``), with the signatures and
the output of ``torch.cuda.memory``'s functions of the same names, so that
``torch.cuda._memory_viz`` (``trace_plot``, ``segment_plot``, ``segsum``, ...)
renders them and https://pytorch.org/memory_viz loads the pickle. See
Note [Memory history] in ``csrc/core/NPUMemoryHistory.h`` for what is recorded.
"""

import pickle
import sys
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

from .. import _C
from .utils import _lazy_init

__all__ = ["memory_snapshot"]

_Enabled = Optional[Union[Literal["state", "all"], bool]]


def _record_memory_history(
    enabled: _Enabled = "all",
    context: Optional[Literal["state", "alloc", "all"]] = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
) -> None:
    r"""Start (or stop) recording the allocator's history, as ``torch.cuda.memory._record_memory_history``.

    Args:
        enabled: ``None`` stops recording; ``"state"`` keeps the stack of every
            live allocation (shown by snapshots); ``"all"`` also keeps a trace
            of every alloc/free/segment event per device. ``True``/``False``
            mean ``"all"``/``None``.
        context: which events keep a stack: ``None`` none, ``"state"`` live
            allocations, ``"alloc"`` also the trace's allocations, ``"all"``
            also the frees.
        stacks: ``"python"`` for Python (and TorchScript) frames, ``"all"``
            to add C++ frames.
        max_entries: at most this many trace entries are kept per device, the
            oldest dropped first.
        device: ignored, as in CUDA (the history covers every device).
        clear_history: drop the entries recorded so far.

    Raises:
        ValueError: an argument outside the values above.
    """
    del device  # covers every device, as CUDA's
    if enabled is True:
        enabled = "all"
    elif enabled is False:
        enabled = None
    if not isinstance(max_entries, int) or isinstance(max_entries, bool):
        raise TypeError(f"_record_memory_history: max_entries must be an int, got "
                        f"{type(max_entries).__name__}")
    if enabled is not None and max_entries <= 0:
        raise ValueError(f"_record_memory_history: max_entries must be positive, got {max_entries}")
    _lazy_init()
    _C._npu_recordMemoryHistory(enabled, context, stacks, min(max_entries, 2**63 - 1),
                                bool(clear_history))


def _snapshot(device: Any = None, augment_with_fx_traces: bool = False) -> Dict[str, Any]:
    r"""The allocator's state and history, as ``torch.cuda.memory._snapshot``.

    Returns a dict with ``segments`` (every device's segments, each with its
    ``blocks``: address, size, requested_size, state ``active_allocated`` /
    ``active_pending_free`` / ``inactive``, frames), ``device_traces`` (one
    list of trace entries per device: action, addr, size, stream, time_us,
    frames) and ``allocator_settings``. Frames are dicts with ``filename``,
    ``line`` and ``name``. ``device`` is ignored, as in CUDA.
    ``augment_with_fx_traces=True`` adds PyTorch's FX debug fields to frames of
    FX-generated code (``fx_node_op``, ``fx_node_name``, ``fx_original_trace``,
    ...), mapping them back to the model's source, as CUDA's does.
    """
    del device
    _lazy_init()
    snapshot = _C._npu_memorySnapshot()
    if augment_with_fx_traces:
        # PyTorch's helper only reads and extends the frames: nothing in it is CUDA's.
        from torch.cuda.memory import _augment_memory_snapshot_stack_traces

        snapshot = _augment_memory_snapshot_stack_traces(snapshot)
    return snapshot


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    r"""Pickle :func:`_snapshot` to ``filename``, for https://pytorch.org/memory_viz."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


def memory_snapshot(mempool_id: Optional[Tuple[int, int]] = None) -> List[Dict[str, Any]]:
    r"""The segments of every device (``_snapshot()["segments"]``), as ``torch.cuda.memory_snapshot``.

    Args:
        mempool_id: only the segments of this private pool (a ``MemPool.id``).
    """
    segments = _snapshot()["segments"]
    if mempool_id is None:
        return segments
    if (not isinstance(mempool_id, tuple) or len(mempool_id) != 2
            or not all(isinstance(v, int) for v in mempool_id)):
        raise TypeError(f"memory_snapshot: mempool_id must be a pair of ints, got {mempool_id!r}")
    return [s for s in segments if tuple(s["segment_pool_id"]) == mempool_id]
