"""Legacy typed tensor classes of ``torch.npu`` (``torch.npu.FloatTensor`` & co.).

They mirror ``torch.cuda.FloatTensor``: calling one makes an npu tensor of its
dtype on the current device (or ``device=``), and ``isinstance(t, torch.npu.FloatTensor)`` is
true for any float32 tensor on an npu device (strided layout). They are not
real subclasses: ``type(torch.npu.FloatTensor(2))`` is ``torch.Tensor``, as
PyTorch's typed tensor constructors return plain tensors too.
"""

from typing import Any

import torch

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
]


class _NPUTensorType(type):
    """Metaclass: construction and ``isinstance`` by (device type, dtype)."""

    dtype: torch.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return (
            isinstance(obj, torch.Tensor)
            and obj.device.type == "npu"
            and obj.layout == torch.strided
            and obj.dtype == cls.dtype
        )

    def __call__(cls, *args: Any, device: Any = None) -> torch.Tensor:  # type: ignore[override]
        from .utils import _checked_index, _lazy_init

        _lazy_init()
        # device: an npu index, "npu:N" or torch.device; the current device if None.
        if isinstance(device, torch.device) and device.type != "npu" or (
            isinstance(device, str) and not device.startswith("npu")
        ):
            raise RuntimeError(f"legacy constructor expects device type: npu but device type: {device} was passed")
        where = torch.device("npu", _checked_index(device))
        if not args:
            return torch.empty(0, dtype=cls.dtype, device=where)
        sizes = args[0] if len(args) == 1 and isinstance(args[0], torch.Size) else args
        if all(isinstance(a, int) and not isinstance(a, bool) for a in sizes):
            return torch.empty(tuple(sizes), dtype=cls.dtype, device=where)
        if len(args) != 1:
            raise TypeError(
                f"torch.npu.{cls.__name__}() expects sizes (ints or a torch.Size), one sequence of data "
                f"or one tensor, but got {args!r}"
            )
        if isinstance(args[0], torch.Tensor):
            return args[0].to(device=where, dtype=cls.dtype)
        return torch.tensor(args[0], dtype=cls.dtype, device=where)


def _make(name: str, dtype: torch.dtype) -> type:
    return _NPUTensorType(name, (), {"dtype": dtype, "is_npu": True, "is_sparse": False, "__module__": "torch.npu"})



DoubleTensor = _make("DoubleTensor", torch.float64)
FloatTensor = _make("FloatTensor", torch.float32)
HalfTensor = _make("HalfTensor", torch.float16)
BFloat16Tensor = _make("BFloat16Tensor", torch.bfloat16)
LongTensor = _make("LongTensor", torch.int64)
IntTensor = _make("IntTensor", torch.int32)
ShortTensor = _make("ShortTensor", torch.int16)
CharTensor = _make("CharTensor", torch.int8)
ByteTensor = _make("ByteTensor", torch.uint8)
BoolTensor = _make("BoolTensor", torch.bool)
