"""torch_npu on a simulated NPU: PyTorch's ``npu`` device backend.

Importing this package registers the ``npu`` device with PyTorch: ``torch.npu``,
``Tensor.npu()``, ``Tensor.is_npu``, the stream/event machinery and
``torch.accelerator``. Every op on npu tensors runs asynchronously on the
current stream of its device, on a simulated device that runs on the CPU.
"""


def _autoload() -> None:
    r"""Entry point of PyTorch's device-backend autoload (group ``torch.backends``).

    When the package is installed, ``import torch`` imports torch_npu and calls
    this; importing the package already registered the ``npu`` device, so there
    is nothing left to do. ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns the
    autoload off.

    Defined before ``import torch``: when the program imports torch_npu first,
    torch_npu's ``import torch`` runs the autoload, which finds this package
    half-initialised in ``sys.modules`` and calls this function right away.
    """


import torch  # noqa: E402

# Logs each environment variable read from here on (TORCH_NPU_LOGS=env), as
# torch_npu does: first, to see the reads of initialisation.
from .utils import patch_getenv as _patch_getenv  # noqa: E402,F401
from .version import __version__  # noqa: E402

# Loads the native libraries: registers the guard, hooks, allocator,
# generator and every op kernel for PrivateUse1.
from . import _C  # noqa: F401
from ._logging import _internal as _logging_internal  # noqa: E402

# torch_npu's log names in torch._logging, TORCH_NPU_LOGS, set_logs -> C++.
_logging_internal._init()

torch.utils.rename_privateuse1_backend("npu")

from . import npu  # noqa: E402

torch._register_device_module("npu", npu)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from . import profiler  # noqa: E402
from . import distributed  # noqa: E402  (registers torch.distributed's "hccl" backend)
# torch_npu's top level has these (not in __all__); _ShardedGradScaler is
# loaded on first use by __getattr__ below: it imports FSDP.
from ._C._distributed_c10d import ParallelStore  # noqa: E402,F401
from .utils import _dynamo  # noqa: E402
from . import optim  # noqa: E402  (its optimizer modules are imported on first use)
from .utils.combine_tensors import get_storage_size, npu_change_data_ptr  # noqa: E402,F401
from .utils import _multiprocessing  # noqa: E402,F401  (npu tensors refused by torch.multiprocessing)
from .npu._graph_tensor_dump import print_npugraph_tensor, save_npugraph_tensor  # noqa: E402,F401

#: ``torch_npu.empty_with_swapped_memory(size, *, dtype=None, device=None)``:
#: an uninitialised npu tensor in host memory mapped into the device, for
#: tensors larger than the device's memory (Note [Swapped memory] in
#: csrc/core/NPUSwappedMemoryAllocator.h). torch_npu's op, ``torch.ops.npu``'s.
empty_with_swapped_memory = torch.ops.npu.empty_with_swapped_memory

# Dynamo's npu interface and stream tracing, set up when torch._dynamo is
# first imported (importing it here would cost seconds).
_dynamo._install()
# npu kernels of the random-state ops of compiled recomputation, set up when
# torch._prims.rng_prims is first imported.
from .utils import _inductor  # noqa: E402,F401

__all__ = ["npu", "distributed", "profiler", "erase_stream"]

#: Dtypes npu tensors cannot have: the quantized ones (no ``Quantizednpu``
#: kernels). torch_npu publishes the same list; packages such as MindSpeed
#: filter ``torch``'s dtypes with it.
unsupported_dtype = [torch.quint8, torch.quint4x2, torch.quint2x4, torch.qint32, torch.qint8]



def erase_stream(tensor, stream):  # type: (torch.Tensor, npu.Stream) -> None
    r"""Undo ``tensor.record_stream(stream)``.

    After this, the caching allocator no longer waits for work queued on
    ``stream`` before reusing the tensor's memory. The caller takes the
    responsibility that no such work still reads or writes the memory.

    Args:
        tensor (torch.Tensor): an npu tensor.
        stream (torch_npu.npu.Stream): a stream previously passed to
            ``tensor.record_stream``.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"erase_stream expects a torch.Tensor, but got {type(tensor).__name__}")
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"erase_stream expects a torch_npu.npu.Stream, but got {type(stream).__name__}")
    _C._npu_checkStreamArg(stream, "erase_stream")  # e.g. a cpu stream: named as such
    _C._npu_eraseStream(tensor, stream.stream_id, stream.device_index, stream.device_type)


def __getattr__(name: str) -> object:
    r"""torch_npu's ``_ShardedGradScaler`` at the top level, imported when first
    used (``torch_npu.npu.amp.sharded_grad_scaler`` imports FSDP, over a second)."""
    if name == "_ShardedGradScaler":
        from .npu.amp.sharded_grad_scaler import _ShardedGradScaler

        globals()[name] = _ShardedGradScaler
        return _ShardedGradScaler
    raise AttributeError(f"module 'torch_npu' has no attribute {name!r}")


def _enable_sanitizer_if_needed() -> None:
    """``TORCH_NPU_SANITIZER=1``: enable the stream sanitizer now (torch_npu.npu._sanitizer)."""
    import os

    if os.environ.get("TORCH_NPU_SANITIZER", ""):
        from .npu import _sanitizer

        _sanitizer._enable_from_env()


_enable_sanitizer_if_needed()
