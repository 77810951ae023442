"""npu tensors and events sent through ``torch.multiprocessing``.

Events created with ``interprocess=True`` travel as their IPC handle and are opened in the
receiving process (Note [Inter-process events] in ``csrc/core/NPUIpcEvent.h``), as CUDA
events do. npu tensors are refused with an error that says why:

The simulated NPU's memory belongs to the process that allocated it: there is
no inter-process memory handle (CUDA's and torch_npu's IPC), so another
process cannot map an npu tensor. PyTorch's reducers would try the CPU's
shared-memory path and fail with "_share_fd_: only available on CPU", or, for
CUDA, pickle an IPC handle. This wraps the reducers ``torch.multiprocessing``
registered for tensors and storages so that an npu one raises, at the
``put``/``send``, a message that names the cause and the way around it; every
other tensor goes to PyTorch's reducer unchanged.
"""

from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

from torch.multiprocessing import reductions

__all__: list = []

_REFUSAL = (
    "Cannot send an npu {what} to another process: the simulated NPU has no inter-process memory "
    "(torch_npu's NPU IPC is not provided). Send a CPU copy ({hint}) and move it to npu in the "
    "receiving process."
)


def _refusing_npu(original: Callable[[Any], Any], what: str, hint: str) -> Callable[[Any], Any]:
    def reduce(obj: Any) -> Any:
        if obj.device.type == "npu":
            raise RuntimeError(_REFUSAL.format(what=what, hint=hint))
        return original(obj)

    reduce.__wrapped__ = original  # type: ignore[attr-defined]
    return reduce


def _install() -> None:
    wrappers = {
        reductions.reduce_tensor: _refusing_npu(reductions.reduce_tensor, "tensor", "tensor.cpu()"),
        reductions.reduce_storage: _refusing_npu(reductions.reduce_storage, "storage", "storage.cpu()"),
        reductions.reduce_typed_storage: _refusing_npu(
            reductions.reduce_typed_storage, "storage", "storage.cpu()"),
        reductions.reduce_typed_storage_child: _refusing_npu(
            reductions.reduce_typed_storage_child, "storage", "storage.cpu()"),
    }
    for cls, reducer in list(ForkingPickler._extra_reducers.items()):
        if reducer in wrappers:
            ForkingPickler.register(cls, wrappers[reducer])


def _rebuild_npu_event(device: int, handle: bytes) -> Any:
    import torch_npu

    return torch_npu.npu.Event.from_ipc_handle(device, handle)


def _reduce_npu_event(event: Any) -> Any:
    handle = event.ipc_handle()  # refuses an event that is not interprocess, with its reason
    return (_rebuild_npu_event, (event.device.index, handle))


def _install_events() -> None:
    from torch_npu.npu.streams import Event

    ForkingPickler.register(Event, _reduce_npu_event)


_install()
_install_events()
