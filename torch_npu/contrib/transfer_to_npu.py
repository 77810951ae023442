"""Run code written for CUDA on the npu: ``import torch_npu.contrib.transfer_to_npu``.

torch_npu's migration module, with the same effect on the APIs below.
Importing it (once per process; it cannot be undone):

- ``torch.cuda``: every public name of ``torch_npu.npu`` (its ``__all__``)
  replaces the ``torch.cuda`` attribute of that name (``torch.cuda.synchronize``,
  ``torch.cuda.Stream``, ``torch.cuda.memory_allocated``, ...), and likewise
  ``torch.cuda.amp`` with ``torch_npu.npu.amp``; ``torch.cuda.CUDAGraph`` is
  ``NPUGraph``, ``torch.cuda.DoubleTensor`` is ``torch.npu.FloatTensor`` (as in
  torch_npu, although the simulated device has float64);
- device arguments: ``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)`` (and
  a bare int where torch_npu maps one) become the npu device in the torch
  factory functions, ``Tensor.to`` / ``new_*`` / ``pin_memory``,
  ``Module.to`` / ``to_empty``, ``torch.Generator``, ``torch.Event``,
  ``torch.autocast``, ``torch.device`` as a context manager and
  ``torch.set_default_device``, ``torch.cuda.device`` and the ``torch.cuda``
  functions torch_npu wraps;
- ``Tensor.cuda`` / ``Module.cuda`` are ``.npu``, ``Tensor.is_cuda`` is ``is_npu``,
  ``Stream.cuda_stream`` is ``npu_stream`` (beyond torch_npu);
- ``torch.distributed``: ``init_process_group`` maps ``"nccl"`` to ``"hccl"``
  and cuda devices to npu; ``is_nccl_available`` is ``is_hccl_available``,
  ``ProcessGroupNCCL`` is ``ProcessGroupHCCL``;
- ``torch.cuda.memory._record_memory_history`` / ``_snapshot`` /
  ``_dump_snapshot`` are the npu memory history's;
- ``torch._utils._get_available_device_type`` answers ``"npu"``;
- ``torch.cuda.amp.common``, ``torch._C._host_emptyCache`` (pinned memory),
  ``torch.autograd.profiler_util.Kernel``'s device and
  ``torch.utils.cpp_extension.include_paths(device_type="cuda")`` are npu's.

Not done here (torch_npu does them for its compiler stack, which the
simulated NPU does not have): disabling ``torch.jit.script``, the
inductor/dynamo/triton patches, the profiler rewrites and the per-library
patches of torch_npu's ``apis_config.json``. See docs/COMPATIBILITY.md.
"""

import functools
import warnings
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.utils._device

import torch_npu

__all__: List[str] = []

# torch_npu's list. Sparse and quantized factories are mapped too, so that
# they fail in npu terms (npu has neither) rather than asking for CUDA.
_TORCH_FACTORIES = [
    "arange", "as_tensor", "bartlett_window", "blackman_window", "empty", "empty_like", "empty_strided",
    "eye", "from_file", "frombuffer", "full", "full_like", "hamming_window", "hann_window", "kaiser_window",
    "linspace", "load", "logspace", "normal", "ones", "ones_like", "rand", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "randperm", "range", "scalar_tensor", "set_default_device",
    "get_device_module", "tensor", "tril_indices", "triu_indices", "zeros", "zeros_like",
    "sparse_coo_tensor", "sparse_csr_tensor", "sparse_compressed_tensor", "_sparse_coo_tensor_unsafe",
    "_sparse_csr_tensor_unsafe", "_empty_affine_quantized", "_empty_per_channel_affine_quantized",
    "empty_quantized", "_pin_memory", "_cudnn_init_dropout_state",
]
_TENSOR_METHODS = ["new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor", "new_zeros", "to",
                   "pin_memory"]
_MODULE_METHODS = ["to", "to_empty"]
_CUDA_FUNCTIONS = [
    "get_device_properties", "get_device_name", "get_device_capability", "set_device", "synchronize",
    "mem_get_info", "memory_stats", "memory_summary", "memory_allocated", "max_memory_allocated",
    "reset_max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_max_memory_cached",
    "reset_peak_memory_stats", "default_stream", "can_device_access_peer", "current_stream",
    "set_per_process_memory_fraction", "caching_allocator_alloc", "utilization",
]
_DEVICE_KWARGS = ["device", "device_type", "map_location", "device_id"]


def _to_npu(arg: Any, map_int: bool) -> Any:
    r"""``arg`` with a cuda device replaced by the npu one; anything else unchanged."""
    if isinstance(arg, str) and "cuda" in arg:
        return arg.replace("cuda", "npu")
    if isinstance(arg, torch.device) and arg.type == "cuda":
        return torch.device("npu", arg.index) if arg.index is not None else torch.device("npu")
    if map_int and isinstance(arg, int) and not isinstance(arg, bool):
        return f"npu:{arg}"
    if isinstance(arg, dict):  # map_location={"cuda:0": "cuda:1"}
        return {_to_npu(k, False): _to_npu(v, False) for k, v in arg.items()}
    return arg


def _map_devices(fn: Callable, map_int: bool = False) -> Callable:
    r"""``fn`` with its device arguments mapped from cuda to npu.

    Positional arguments are mapped when they are device strings or
    ``torch.device`` (ints only where ``map_int``: ``Tensor.to(1)``); keyword
    arguments named like a device always, ints included, as torch_npu does.
    """
    @functools.wraps(fn)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_to_npu(a, map_int) for a in args)
        for name in _DEVICE_KWARGS:
            if kwargs.get(name) is not None:
                kwargs[name] = _to_npu(kwargs[name], True)
        if isinstance(kwargs.get("device_ids"), (list, tuple)):
            ids = kwargs["device_ids"]
            kwargs["device_ids"] = type(ids)(_to_npu(d, map_int) for d in ids)
        return fn(*args, **kwargs)

    return mapped


def _wrap_all(owner: Any, names: List[str], map_int: bool = False) -> None:
    for name in names:
        fn = getattr(owner, name, None)
        if fn is not None:
            setattr(owner, name, _map_devices(fn, map_int or name in ("to", "to_empty")))


class _TypeProxyMeta(type(torch.Generator)):  # type: ignore[misc]
    # isinstance(x, torch.Generator) stays true for generators made before the
    # import, and by C++, which are instances of the original class.
    def __instancecheck__(cls, instance: Any) -> bool:
        return super().__instancecheck__(instance) or isinstance(instance, cls.__mro__[1])


class _Generator(torch.Generator, metaclass=_TypeProxyMeta):
    def __new__(cls, device: Any = "cpu") -> "_Generator":
        return super().__new__(cls, _to_npu(device, False))


class _Event(torch.Event, metaclass=_TypeProxyMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> "_Event":
        args = tuple(_to_npu(a, False) for a in args)
        if kwargs.get("device") is not None:
            kwargs["device"] = _to_npu(kwargs["device"], True)
        return super().__new__(cls, *args, **kwargs)


def _map_backend(fn: Callable) -> Callable:
    r"""``fn`` with ``"nccl"`` read as ``"hccl"`` in its backend arguments."""
    @functools.wraps(fn)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        def fix(v: Any) -> Any:
            return v.replace("nccl", "hccl").replace("cuda", "npu") if isinstance(v, str) else v
        args = tuple(fix(a) for a in args)
        if "backend" in kwargs:
            kwargs["backend"] = fix(kwargs["backend"])
        return fn(*args, **kwargs)

    return mapped


def _patch_cuda_modules() -> None:
    for name in torch_npu.npu.__all__:
        setattr(torch.cuda, name, getattr(torch_npu.npu, name))
    for name in torch_npu.npu.amp.__all__:
        setattr(torch.cuda.amp, name, getattr(torch_npu.npu.amp, name))
    torch.cuda.amp.autocast_mode = torch_npu.npu.amp.autocast_mode
    torch.cuda.amp.grad_scaler = torch_npu.npu.amp.grad_scaler
    torch.cuda.amp.common = torch_npu.npu.amp.common
    torch.cuda.random = torch_npu.npu.random
    torch.cuda.CUDAGraph = torch_npu.npu.NPUGraph
    torch.cuda.DoubleTensor = torch_npu.npu.FloatTensor
    _wrap_all(torch.cuda, _CUDA_FUNCTIONS)
    torch.cuda.device.__init__ = _map_devices(torch.cuda.device.__init__, map_int=False)
    torch.cuda.default_generators = torch_npu.npu.default_generators
    # Memory history (docs/DEBUGGING.md): CUDA's names, npu's recorder.
    for name in ("_record_memory_history", "_snapshot"):
        setattr(torch.cuda.memory, name, _map_devices(getattr(torch_npu.npu.memory, name)))
    torch.cuda.memory._dump_snapshot = torch_npu.npu.memory._dump_snapshot
    # torch.cuda.graphs empties the pinned-memory cache through this name.
    torch._C._host_emptyCache = torch_npu._C._npu_hostEmptyCache
    # torch.cuda.Stream's raw handle attribute: the npu stream's.
    torch_npu.npu.Stream.cuda_stream = torch_npu.npu.Stream.npu_stream


def _patch_devices() -> None:
    # The set of factories a device context (`with torch.device(...)`,
    # set_default_device) applies its device to is cached at its first use;
    # it must hold the original functions, which the wrappers below call.
    torch.utils._device._device_constructors()
    _wrap_all(torch, _TORCH_FACTORIES)
    _wrap_all(torch.Tensor, _TENSOR_METHODS)
    _wrap_all(torch.nn.Module, _MODULE_METHODS)
    _wrap_all(torch.fft, ["fftfreq", "rfftfreq"])
    torch.UntypedStorage.__new__ = _map_devices(torch.UntypedStorage.__new__)
    torch.Generator = _Generator
    torch.Event = _Event
    torch.amp.autocast_mode.autocast.__init__ = _map_devices(torch.amp.autocast_mode.autocast.__init__)
    torch.utils._device.DeviceContext.__init__ = _map_devices(torch.utils._device.DeviceContext.__init__)
    torch.Tensor.cuda = torch.Tensor.npu
    torch.Tensor.is_cuda = torch.Tensor.is_npu
    torch.nn.Module.cuda = torch.nn.Module.npu
    torch._utils._get_available_device_type = _available_device_type
    _patch_profiler_kernel()
    _patch_cpp_extension()


def _patch_profiler_kernel() -> None:
    # torch.autograd.profiler_util.Kernel(name, device, duration): its device.
    from torch.autograd.profiler_util import Kernel

    original_new = Kernel.__new__

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        if len(args) > 1:
            args = (args[0], _to_npu(args[1], False)) + tuple(args[2:])
        if "device" in kwargs:
            kwargs["device"] = _to_npu(kwargs["device"], False)
        return original_new(cls, *args, **kwargs)

    Kernel.__new__ = new  # type: ignore[method-assign]


def _patch_cpp_extension() -> None:
    # As torch_npu: `torch.utils.cpp_extension` becomes an attribute, and
    # include_paths(device_type="cuda") asks for npu's (PyTorch's own paths).
    import torch.utils.cpp_extension as cpp_extension

    torch.utils.cpp_extension = cpp_extension
    _wrap_all(cpp_extension, ["include_paths"])


def _available_device_type() -> Optional[str]:
    return "npu" if torch_npu.npu.is_available() else None


def _patch_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch_npu.distributed  # noqa: F401  (registers "hccl")

    dist.init_process_group = _map_backend(_map_devices(dist.init_process_group))
    dist.is_nccl_available = torch_npu.distributed.is_hccl_available
    dist.ProcessGroupNCCL = torch_npu.distributed.ProcessGroupHCCL
    dist.distributed_c10d.ProcessGroupNCCL = torch_npu.distributed.ProcessGroupHCCL
    dist.distributed_c10d._new_group_with_tag = _map_backend(dist.distributed_c10d._new_group_with_tag)
    backend_map: Dict[str, str] = getattr(dist.Backend, "default_device_backend_map", {})
    backend_map.pop("cuda", None)  # so "cpu:gloo,cuda:nccl" defaults do not pick nccl
    dist.device_mesh.init_device_mesh = _map_devices(dist.device_mesh.init_device_mesh)
    dist.device_mesh.DeviceMesh.__init__ = _map_devices(dist.device_mesh.DeviceMesh.__init__)
    torch.nn.parallel.DistributedDataParallel.__init__ = _map_devices(
        torch.nn.parallel.DistributedDataParallel.__init__
    )


def _init() -> None:
    if getattr(torch.cuda, "_transferred_to_npu", False):
        return  # imported again under another name: patch once
    warnings.warn(
        "torch_npu.contrib.transfer_to_npu: torch.cuda.* and torch.cuda.amp.* are replaced with "
        "torch.npu.* and torch.npu.amp.*, Tensor.cuda and Module.cuda with .npu, cuda device "
        "arguments with npu ones, and the nccl backend with hccl.",
        ImportWarning,
        stacklevel=3,
    )
    _patch_cuda_modules()
    _patch_devices()
    _patch_distributed()
    torch.cuda._transferred_to_npu = True


_init()
