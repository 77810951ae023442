"""torch_npu.empty_with_swapped_memory: npu tensors in host memory mapped into
the device (Note [Swapped memory], Note [Mapped host memory])."""

import ctypes
import gc

import pytest
import torch
import torch_npu

from conftest import load_npurt

NPU_MEMORY_TYPE_HOST = 1


class _Attributes(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("basePointer", ctypes.c_void_p),
                ("size", ctypes.c_size_t)]


def attributes(ptr):
    out = _Attributes()
    assert load_npurt().npuPointerGetAttributes(ctypes.byref(out), ctypes.c_void_p(ptr)) == 0
    return out


def test_swapped_tensors_are_npu_tensors_in_mapped_host_memory():
    before = torch.npu.memory_allocated(1)
    t = torch_npu.empty_with_swapped_memory([256, 4], dtype=torch.float16, device="npu:1")
    assert t.device == torch.device("npu", 1) and t.dtype == torch.float16 and t.shape == (256, 4)
    assert t.is_contiguous()
    assert torch.npu.memory_allocated(1) == before  # host memory: not the device's
    a = attributes(t.data_ptr())
    assert (a.type, a.device) == (NPU_MEMORY_TYPE_HOST, 1)
    assert a.basePointer % 4096 == 0  # page-aligned, as torch_npu's


def test_ops_copies_and_clones_use_swapped_memory_in_place():
    x = torch.randn(64, 64)
    t = torch_npu.empty_with_swapped_memory(x.shape, device="npu")
    t.copy_(x.npu())  # device to device into mapped memory
    torch.testing.assert_close((t @ t).cpu(), x @ x)
    t.mul_(2).add_(1)  # kernels write it in place
    torch.testing.assert_close(t.cpu(), x * 2 + 1)
    torch.testing.assert_close(t.clone().cpu(), x * 2 + 1)
    storage = t.untyped_storage().clone()  # the allocator's copy_data
    assert storage.device == t.device
    torch.testing.assert_close(torch.tensor(storage.cpu(), dtype=torch.uint8).view(torch.float32)[:4096]
                               .view(64, 64), x * 2 + 1)
    t.copy_(x)  # host to device
    assert torch.equal(t.cpu(), x)


def test_a_freed_swapped_tensor_stays_mapped_until_its_queued_work_ran(gate):
    stream = torch.npu.Stream()
    t = torch_npu.empty_with_swapped_memory([1024], device="npu")
    ptr = t.data_ptr()
    g = gate(stream)
    with torch.npu.stream(stream):
        t.fill_(3)
    del t
    gc.collect()
    assert attributes(ptr).type == NPU_MEMORY_TYPE_HOST  # held by the queued fill
    g.release()
    stream.synchronize()
    torch.npu.synchronize()
    # Unregistered now (the address may already belong to something else, but
    # never to a mapping of this allocation).
    after = attributes(ptr)
    assert not (after.type == NPU_MEMORY_TYPE_HOST and after.device == 0 and after.basePointer == ptr)


def test_defaults_and_deterministic_fill():
    assert torch_npu.empty_with_swapped_memory([3]).device == torch.device("npu", torch.npu.current_device())
    assert torch_npu.empty_with_swapped_memory([0]).numel() == 0
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.isnan(torch_npu.empty_with_swapped_memory([5]).cpu()).all()
    finally:
        torch.use_deterministic_algorithms(previous)


@pytest.mark.parametrize("kwargs, match", [
    ({"device": "cpu"}, "Expected a npu device, but got: cpu"),
    ({"device": "npu:9"}, "Invalid device_index: 9"),
])
def test_bad_devices_are_refused(kwargs, match):
    with pytest.raises(RuntimeError, match=match):
        torch_npu.empty_with_swapped_memory([3], **kwargs)


def test_negative_sizes_are_refused():
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        torch_npu.empty_with_swapped_memory([-1])
