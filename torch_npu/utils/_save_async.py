r"""``torch_npu.utils.save_async``: ``torch.save`` without waiting for the device or the disk.

Note [What an asynchronous save captures]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``save_async(obj, f)`` saves what ``torch.save(obj, f)`` called at the same point would save:
the object as it is at the call, and each tensor's data as the device's work queued before the
call leaves it. Training goes on at once (an optimizer step right after the call must not leak
into the checkpoint), so the call itself

- pickles ``obj`` on the calling thread (so later changes to dicts, lists or module attributes
  cannot reach the file), recording for every storage its location (``npu:0`` for npu
  storages, so ``torch.load`` restores them there, as after ``torch.save``);
- queues, for every npu storage, a copy into a pinned host buffer of its own on the current
  stream of the storage's device, behind the work that computes the tensor and ahead of any
  later in-place update of it; CPU storages are copied at once;
- queues a host callback and records an event after those copies on each device (a failure
  of the stream discards the callback, so the writer knows the copies did not run),

and a writer thread waits for the events and writes the file. Nothing waits for the device on
the calling thread. torch_npu instead pickles and copies in the writer thread, on a side stream
that does not wait for the compute stream, and makes the next backward pass wait for the copies
through a hook on ``model``: a step taken before the copies ran can reach the checkpoint, and a
pickled container can change while it is pickled. ``model`` is accepted and not needed here.

A path is written under a temporary name in the same directory and renamed when complete, so a
reader never sees a partial file. The returned future completes when the file is written, with
the error if it was not (copies discarded by a failure of their stream, a full disk); such a failure is also warned about from
the writer thread, since nobody may be waiting on the future. The process waits for pending
saves before it exits. The callback is a host callback of the current stream, which compat mode
refuses on an external stream (docs/EXTERNAL_STREAMS.md): there the call raises. The host memory a save holds is the size of the tensors saved, until the
file is written.
"""

import io
import os
import pickle
import sys
import threading
import warnings
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.serialization as _ser

__all__ = ["save_async"]


class _Snapshot:
    """The pickled object and copies of its storages' data, filled in stream order."""

    def __init__(self) -> None:
        self.pickled = b""
        self.storages: List[Tuple[str, torch.UntypedStorage]] = []  # (key, host copy)
        # Per device: the event after the copies, and a flag set in stream order after them.
        self.copied: List[Tuple[int, torch.Event, threading.Event]] = []


def _host_copy(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    nbytes = storage.nbytes()
    if storage.device.type == "cpu":
        return torch.empty(nbytes, dtype=torch.uint8).untyped_storage().copy_(storage)
    copy = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).untyped_storage()
    # On the current stream of the storage's device: behind the work that made the data.
    with torch.npu.device(storage.device):
        copy.copy_(storage, non_blocking=True)
    return copy


def _take_snapshot(obj: Any, pickle_module: Any, pickle_protocol: int) -> _Snapshot:
    snapshot = _Snapshot()
    keys: Dict[int, str] = {}
    dtype_of: Dict[int, torch.dtype] = {}
    devices = set()

    def persistent_id(item: Any) -> Optional[Tuple[Any, ...]]:
        if not (isinstance(item, torch.storage.TypedStorage) or torch.is_storage(item)):
            return None
        if isinstance(item, torch.storage.TypedStorage):
            storage = item._untyped_storage
            dtype = item.dtype
            storage_type = getattr(torch, item._pickle_storage_type())
            numel = item._size()
        else:
            storage = item
            dtype = torch.uint8
            storage_type = _ser.normalize_storage_type(type(item))
            numel = storage.nbytes()
        if storage.device.type not in ("cpu", "npu"):
            raise RuntimeError(
                f"save_async saves cpu and npu tensors; got a storage on {storage.device}. "
                "Use torch.save for it.")
        if storage.data_ptr() != 0:
            if dtype_of.setdefault(storage.data_ptr(), dtype) != dtype:
                raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                                   "data as different types")
        key = keys.get(storage._cdata)
        if key is None:
            key = keys[storage._cdata] = str(len(keys))
            snapshot.storages.append((key, _host_copy(storage)))
            if storage.device.type == "npu":
                devices.add(storage.device.index)
        return ("storage", storage_type, key, _ser.location_tag(storage), numel)

    class _Pickler(pickle_module.Pickler):  # type: ignore[name-defined, misc]
        def persistent_id(self, item: Any) -> Optional[Tuple[Any, ...]]:
            return persistent_id(item)

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle_protocol).dump(obj)
    snapshot.pickled = buffer.getvalue()
    for index in sorted(devices):
        stream = torch.npu.current_stream(index)
        # A failed copy does not fail an event, but the failure discards the work queued
        # behind it on its stream: a flag set in stream order says the copies ran.
        ran = threading.Event()
        torch.npu._launch_host_func(stream, lambda flag: flag.set(), ran)
        event = torch.npu.Event()
        event.record(stream)
        snapshot.copied.append((index, event, ran))
    return snapshot


def _write_zip(snapshot: _Snapshot, f: Any, disable_byteorder_record: bool) -> None:
    with _ser._open_zipfile_writer(f) as zip_file:
        zip_file.write_record("data.pkl", snapshot.pickled, len(snapshot.pickled))
        zip_file.write_record(".format_version", "1", len("1"))
        alignment = str(_ser._get_storage_alignment())
        zip_file.write_record(".storage_alignment", alignment, len(alignment))
        if not disable_byteorder_record:
            zip_file.write_record("byteorder", sys.byteorder, len(sys.byteorder))
        for key, storage in snapshot.storages:
            zip_file.write_record(f"data/{key}", storage, storage.nbytes())


def _write(snapshot: _Snapshot, f: Any, disable_byteorder_record: bool, done: Future) -> None:
    try:
        for index, event, ran in snapshot.copied:
            event.synchronize()
            if not ran.is_set():
                raise RuntimeError(
                    f"the copy of the tensors of npu:{index} to the host did not run: a failure "
                    "of the stream discarded it (the stream reports that failure at its next "
                    "synchronize); nothing was written")
        if isinstance(f, (str, os.PathLike)):
            path = os.fspath(f)
            partial = os.path.join(os.path.dirname(path) or ".",
                                   f".{os.path.basename(path)}.{os.getpid()}.{id(done)}.partial")
            try:
                _write_zip(snapshot, partial, disable_byteorder_record)
                os.replace(partial, path)
            finally:
                if os.path.exists(partial):
                    os.remove(partial)
        else:
            _write_zip(snapshot, f, disable_byteorder_record)
    except BaseException as error:  # noqa: B036 - the future carries every failure
        warnings.warn(f"torch_npu.utils.save_async could not write {f!r}: {error}",
                      RuntimeWarning, stacklevel=1)
        done.set_exception(error)
    else:
        done.set_result(None)


def save_async(
    obj: object,
    f: Any,
    pickle_module: Any = pickle,
    pickle_protocol: int = _ser.DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
    model: Optional[torch.nn.Module] = None,
) -> "Future[None]":
    r"""Save ``obj`` to ``f`` as :func:`torch.save` would, returning before the data is written.

    The file holds ``obj`` as it is at the call, with each tensor's data as the work queued on
    its device's current stream before the call leaves it; later updates of the tensors do not
    reach it (Note [What an asynchronous save captures]). ``torch.load`` reads it back, npu
    tensors onto their device.

    Args:
        obj: what to save (tensors, modules, state dicts, anything picklable).
        f: a path (written under a temporary name, then renamed) or a writable binary file.
        pickle_module, pickle_protocol: as for :func:`torch.save`.
        _use_new_zipfile_serialization: must be ``True`` (the legacy format is not supported
            for npu tensors, as in torch_npu).
        _disable_byteorder_record: as for :func:`torch.save`.
        model: accepted for torch_npu's signature; not needed here.

    Returns:
        A :class:`concurrent.futures.Future` that completes when the file is written;
        ``result()`` raises the error if it could not be.

    Raises:
        RuntimeError: the legacy format was asked for, a storage is neither cpu nor npu, or
            storages view the same data as different types (at the call, nothing written).
    """
    if not _use_new_zipfile_serialization:
        raise RuntimeError(
            "torch_npu.utils.save_async writes the zip format only "
            "(_use_new_zipfile_serialization=False is not supported); convert the tensors to "
            "CPU and call torch.save for the legacy format.")
    _ser._check_dill_version(pickle_module)
    del model  # see Note [What an asynchronous save captures]
    snapshot = _take_snapshot(obj, pickle_module, pickle_protocol)
    done: Future = Future()
    done.set_running_or_notify_cancel()
    writer = threading.Thread(target=_write, args=(snapshot, f, _disable_byteorder_record, done),
                              name="torch_npu save_async")
    writer.start()
    return done
