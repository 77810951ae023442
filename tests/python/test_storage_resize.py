"""UntypedStorage.resize_ on npu storages (csrc/aten/Factories.cpp, resizeStorageBytes).

A storage resizes to exactly the size asked, shrinking too, keeping its leading
bytes; 0 frees its memory. FSDP frees and re-allocates its parameters' memory
this way (torch.distributed.utils._free_storage / _alloc_storage). Tensor.resize_
never shrinks a storage, on npu as on CPU.
"""
import torch
import torch_npu
from torch.distributed.utils import _alloc_storage, _free_storage

npu = torch_npu.npu


def _floats(storage: torch.UntypedStorage) -> list:
    return torch.tensor([], dtype=torch.float32, device=storage.device).set_(storage).cpu().tolist()


def test_shrink_keeps_the_leading_bytes_as_on_cpu():
    for device in ("cpu", "npu"):
        s = torch.arange(8.0, device=device).untyped_storage()
        s.resize_(12)
        assert s.nbytes() == 12
        assert _floats(s) == [0.0, 1.0, 2.0], device


def test_grow_keeps_the_bytes_and_adds_room():
    s = torch.arange(4.0, device="npu").untyped_storage()
    s.resize_(32)
    assert s.nbytes() == 32
    assert _floats(s)[:4] == [0.0, 1.0, 2.0, 3.0]


def test_resize_to_zero_frees_the_memory():
    npu.synchronize()
    x = torch.ones(1 << 18, device="npu")  # 1 MiB: a block of its own
    allocated = npu.memory_allocated()
    x.untyped_storage().resize_(0)
    assert x.untyped_storage().nbytes() == 0
    assert npu.memory_allocated() == allocated - 4 * (1 << 18)


def test_fsdp_frees_and_reallocates_a_parameter():
    p = torch.full((64,), 3.0, device="npu")
    _free_storage(p)
    assert p.untyped_storage().nbytes() == 0
    _alloc_storage(p, torch.Size([64]))
    assert p.untyped_storage().nbytes() == 64 * 4
    p.copy_(torch.arange(64.0, device="npu"))
    assert p.cpu().tolist() == [float(i) for i in range(64)]


def test_the_kept_bytes_are_copied_after_the_writes_queued_before(gate):
    stream = npu.current_stream()
    x = torch.zeros(8, device="npu")
    npu.synchronize()
    g = gate(stream)  # nothing queued below runs until release
    x.fill_(5.0)
    x.untyped_storage().resize_(8)  # shrink while the fill is still queued
    g.release()
    assert _floats(x.untyped_storage()) == [5.0, 5.0]


def test_tensor_resize_does_not_shrink_the_storage():
    x = torch.arange(8.0, device="npu")
    x.resize_(2)
    assert x.untyped_storage().nbytes() == 32
    assert x.cpu().tolist() == [0.0, 1.0]
