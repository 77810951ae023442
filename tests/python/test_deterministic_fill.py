"""torch.use_deterministic_algorithms(True) with fill_uninitialized_memory
(its default): npu's empty tensors, and the part of a storage resize_ adds,
hold NaN (floating and complex types) or the type's largest value, as on CPU
(Note [Deterministic fill of uninitialized memory] in csrc/aten/Factories.cpp).
"""

import pytest
import torch
from torch.testing._internal.common_utils import DeterministicGuard

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.int8, torch.int64,
          torch.uint8, torch.bool]


def filled(t):
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return bool(t.isnan().all())
    top = True if t.dtype == torch.bool else torch.iinfo(t.dtype).max
    return bool(t.eq(top).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_factories_fill_like_cpu(dtype):
    makers = [
        lambda d: torch.empty(5, 7, device=d, dtype=dtype),
        lambda d: torch.empty_like(torch.zeros(5, 7, device=d, dtype=dtype)),
        lambda d: torch.empty_strided((5, 7), (1, 5), device=d, dtype=dtype),
        lambda d: torch.empty_permuted((2, 3, 5), (1, 0, 2), device=d, dtype=dtype),
        lambda d: torch.zeros(3, device=d, dtype=dtype).new_empty((4, 4)),
    ]
    for make in makers:
        with DeterministicGuard(True, fill_uninitialized_memory=True):
            cpu, npu = make("cpu"), make("npu")
        assert filled(cpu) and filled(npu)
        assert npu.device.type == "npu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool], ids=str)
def test_resize_fills_only_what_it_adds(dtype):
    a = torch.zeros(6, device="npu", dtype=dtype)
    with DeterministicGuard(True, fill_uninitialized_memory=True):
        a.resize_(4, 5)
    flat = a.flatten().cpu()
    assert not flat[:6].any()
    assert filled(flat[6:])


def test_nothing_is_filled_unless_asked():
    with DeterministicGuard(True, fill_uninitialized_memory=False):
        t = torch.empty(1 << 16, device="npu")
        t.resize_(1 << 17)
    with DeterministicGuard(False, fill_uninitialized_memory=True):
        u = torch.empty(1 << 16, device="npu")
    # Uninitialised memory may hold anything, NaN included, but a fresh
    # block of a caching allocator is not filled: only the fill is asked for.
    torch.npu.synchronize()
    assert not (filled(t) and filled(u))
