"""Legacy typed storage classes of ``torch.npu`` (``torch.npu.FloatStorage`` & co.).

They mirror ``torch.cuda.FloatStorage`` and torch_npu's: ``torch.npu.IntStorage(n)`` makes
an npu ``TypedStorage`` of ``n`` int32 elements on the current device, and
``isinstance(s, torch.npu.FloatStorage)`` is true for any float32 ``TypedStorage`` on an
npu device. PyTorch reads the device of a legacy storage class from the last part of its
module name, so the classes are presented as members of ``torch_npu.npu``. Typed storages
are deprecated in PyTorch; these classes warn as PyTorch's do when their ``dtype`` is read.
"""

from typing import Any, Dict

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal

__all__ = [
    "BFloat16Storage",
    "BoolStorage",
    "ByteStorage",
    "CharStorage",
    "ComplexDoubleStorage",
    "ComplexFloatStorage",
    "DoubleStorage",
    "FloatStorage",
    "HalfStorage",
    "IntStorage",
    "LongStorage",
    "ShortStorage",
]

# The module PyTorch takes the device from (torch.storage._get_device_from_module).
_MODULE = "torch_npu.npu"


class _NPULegacyStorage(_LegacyStorage):
    r"""What no npu storage can do: wrap a host buffer or a shared-memory handle."""

    @classmethod
    def from_buffer(cls, *args: Any, **kwargs: Any) -> Any:
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for NPU storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("_new_with_weak_ptr: Not available for NPU storage")

    @classmethod
    def _new_shared_filename(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("_new_shared_filename: Not available for NPU storage")


def _legacy_storage(name: str, dtype: torch.dtype) -> type:
    def _dtype(cls: Any) -> torch.dtype:
        return dtype

    def _public_dtype(cls: Any) -> torch.dtype:
        _warn_typed_storage_removal()
        return dtype

    namespace: Dict[str, Any] = {
        "__module__": _MODULE,
        "__qualname__": name,
        "__doc__": f"Legacy typed storage of {dtype} on an npu device (deprecated, as in PyTorch).",
        "_dtype": classproperty(_dtype),
        "dtype": classproperty(_public_dtype),
    }
    cls = type(_NPULegacyStorage)(name, (_NPULegacyStorage,), namespace)
    torch._storage_classes.add(cls)  # what torch.is_storage and serialization recognise
    return cls


BFloat16Storage = _legacy_storage("BFloat16Storage", torch.bfloat16)
BoolStorage = _legacy_storage("BoolStorage", torch.bool)
ByteStorage = _legacy_storage("ByteStorage", torch.uint8)
CharStorage = _legacy_storage("CharStorage", torch.int8)
ComplexDoubleStorage = _legacy_storage("ComplexDoubleStorage", torch.cdouble)
ComplexFloatStorage = _legacy_storage("ComplexFloatStorage", torch.cfloat)
DoubleStorage = _legacy_storage("DoubleStorage", torch.double)
FloatStorage = _legacy_storage("FloatStorage", torch.float)
HalfStorage = _legacy_storage("HalfStorage", torch.half)
IntStorage = _legacy_storage("IntStorage", torch.int)
LongStorage = _legacy_storage("LongStorage", torch.long)
ShortStorage = _legacy_storage("ShortStorage", torch.short)
