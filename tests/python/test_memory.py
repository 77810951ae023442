"""The caching allocator: stream-aware reuse, ``Tensor.record_stream``,
``torch_npu.erase_stream``, ``empty_cache``, the statistics
(memory_allocated / max_memory_allocated / memory_reserved /
max_memory_reserved / reset_peak_memory_stats / memory_stats /
memory_summary), out-of-memory as ``torch.OutOfMemoryError`` with the device
usable afterwards, and pinned host memory."""

import contextlib
import gc

import pytest
import torch
import torch_npu

from conftest import run_py_ok

N = 1 << 18  # 1 MiB of float32: a block of its own, never split from small ones


def settle():
    """Finish all work and free what finished tasks still hold."""
    gc.collect()
    torch.npu.synchronize()


def reusable_pointers(numel):
    """Addresses the allocator hands out for float32[numel] tensors on the
    current stream from its cache (until it would need a new segment). With
    splitting and best fit, a freed block need not be the very next one
    handed out; this finds it wherever it is in the cache."""
    held, ptrs = [], set()
    reserved = torch.npu.memory_reserved()
    while True:
        t = torch.empty(numel, device="npu")
        if torch.npu.memory_reserved() != reserved:
            return ptrs
        held.append(t)
        ptrs.add(t.data_ptr())


def test_freed_block_is_reused_on_same_stream():
    settle()
    x = torch.empty(N, device="npu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(N, device="npu")
    assert y.data_ptr() == ptr


def test_block_of_other_stream_not_reused():
    settle()
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        x = torch.empty(N, device="npu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(N, device="npu")  # default stream: must not take s's block
    assert y.data_ptr() != ptr
    with torch.npu.stream(s):
        z = torch.empty(N, device="npu")
    assert z.data_ptr() == ptr


def test_record_stream_delays_reuse_while_stream_busy(gate):
    settle()
    side = torch.npu.Stream()
    x = torch.empty(N, device="npu")
    ptr = x.data_ptr()
    g = gate(side)  # side has pending work
    x.record_stream(side)
    del x
    y = torch.empty(N, device="npu")
    assert y.data_ptr() != ptr  # side may still use the block
    g.release()
    side.synchronize()
    del y
    settle()
    assert ptr in reusable_pointers(N)  # reusable once side finished


@pytest.mark.parametrize("pool", ["default", "mempool"])
def test_block_of_a_finished_stream_is_reused_at_once(pool):
    # Note [Frees need no event on finished streams]: a tensor used by an op
    # of another stream is freed when that op's captures are released (by the
    # synchronize); the other stream has then finished its work, so the block
    # needs no event and the next allocation of its size gets it back.
    settle()
    side = torch.npu.Stream()
    mem_pool = torch.npu.MemPool() if pool == "mempool" else None
    with torch.npu.use_mem_pool(mem_pool) if mem_pool else contextlib.nullcontext():
        x = torch.ones(N, device="npu")
        ptr = x.data_ptr()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            x.record_stream(side)
            y = x + 1
        del x, y
        torch.npu.synchronize()
        z = torch.empty(N, device="npu")
        assert z.data_ptr() == ptr
        del z


def test_without_record_stream_block_is_reused(gate):
    # Control for the test above.
    settle()
    side = torch.npu.Stream()
    x = torch.empty(N, device="npu")
    ptr = x.data_ptr()
    g = gate(side)
    del x
    y = torch.empty(N, device="npu")
    assert y.data_ptr() == ptr
    g.release()


def test_erase_stream_undoes_record_stream(gate):
    settle()
    side = torch.npu.Stream()
    x = torch.empty(N, device="npu")
    ptr = x.data_ptr()
    g = gate(side)
    x.record_stream(side)
    torch_npu.erase_stream(x, side)
    del x
    y = torch.empty(N, device="npu")
    assert y.data_ptr() == ptr
    g.release()


@pytest.mark.parametrize("record", ["record_stream", "no_record_stream", "record_then_erase"])
def test_side_stream_read_is_protected_from_reuse(gate, record):
    # With record_stream as in torch_npu; without it too, beyond CUDA and
    # torch_npu: a queued op records its use of memory of another stream with
    # the allocator (Note [Tasks on other streams record their use]), which
    # erase_stream does not undo. The free itself happens at `del`, as on
    # hardware (the stream sanitizer reports the missing record_stream there).
    settle()
    side = torch.npu.Stream()
    x = torch.full((N,), 2.0, device="npu")
    side.wait_stream(torch.npu.current_stream())
    g = gate(side)
    with torch.npu.stream(side):
        r = x * 10  # reads x later, on the blocked side stream
    ptr = x.data_ptr()
    if record != "no_record_stream":
        x.record_stream(side)
    if record == "record_then_erase":
        torch_npu.erase_stream(x, side)
    allocated = torch.npu.memory_allocated()
    del x
    assert torch.npu.memory_allocated() == allocated - 4 * N
    y = torch.empty(N, device="npu")
    assert y.data_ptr() != ptr
    y.fill_(-1.0)  # would corrupt r if x's block were reused
    torch.npu.current_stream().synchronize()
    g.release()
    side.synchronize()
    assert r.min().item() == 20.0 and r.max().item() == 20.0
    del r, y
    settle()
    assert ptr in reusable_pointers(N)  # reusable once the side stream ran


def test_queued_ops_do_not_hold_memory_of_their_own_stream(gate):
    # Note [Task captures and memory reuse]: a host far ahead of its stream
    # reuses the blocks it drops, as with PyTorch's CUDA allocator; queued
    # tasks do not pin one block per op.
    settle()
    stream = torch.npu.current_stream()
    x = torch.zeros(N, device="npu")
    settle()
    reserved_before = torch.npu.memory_reserved()
    g = gate(stream)  # nothing below runs until release
    for _ in range(100):
        x = x + 1  # each old x is dropped while its reader is still queued
    assert torch.npu.memory_reserved() - reserved_before <= 4 * N * 4
    g.release()
    stream.synchronize()
    assert x.min().item() == 100.0 and x.max().item() == 100.0


def test_inputs_dropped_while_queued_keep_their_values(gate):
    # Note [Task captures and memory reuse]: views, tensor lists and index
    # lists whose tensors the program drops while the ops are queued, then
    # fresh allocations scribbled on before anything ran.
    settle()
    stream = torch.npu.current_stream()
    a = torch.arange(12.0, device="npu").reshape(3, 4)
    index = torch.tensor([0, 2], device="npu")
    stream.synchronize()
    g = gate(stream)
    results = []
    for i in range(20):
        x = a + i
        v = x[:, 1:3]
        parts = [x * 2, v.sum(1, keepdim=True).expand(3, 4)]
        c = torch.cat(parts, 0)
        results.append(c[index + 0])
        del x, v, parts, c
    junk = [torch.full((3, 4), -7.0, device="npu") for _ in range(50)]
    g.release()
    stream.synchronize()
    for i, r in enumerate(results):
        x = torch.arange(12.0).reshape(3, 4) + i
        c = torch.cat([x * 2, x[:, 1:3].sum(1, keepdim=True).expand(3, 4)], 0)
        assert torch.equal(r.cpu(), c[torch.tensor([0, 2])]), i
    del junk


def test_queued_op_sees_its_inputs_as_they_were_at_launch(gate):
    settle()
    stream = torch.npu.current_stream()
    x = torch.ones(4, device="npu")
    g = gate(stream)
    y = x * 3
    x.resize_(8)  # on the host, while the multiply is still queued
    g.release()
    stream.synchronize()
    assert y.shape == (4,) and y.tolist() == [3.0] * 4


def test_record_stream_protects_data_with_task_delay():
    out = run_py_ok(
        """
        import torch, torch_npu
        side = torch.npu.Stream()
        x = torch.full((1 << 18,), 2.0, device="npu")
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            r = x * 10
        x.record_stream(side)
        del x
        y = torch.empty(1 << 18, device="npu").fill_(-1.0)
        side.synchronize()
        print(r.min().item(), r.max().item())
        """,
        env={"NPU_SIM_TASK_DELAY_US": "20000"},
    )
    assert out.split() == ["20.0", "20.0"]


def test_memory_allocated_tracks_tensors():
    settle()
    base = torch.npu.memory_allocated()
    x = torch.empty(N, device="npu")
    assert torch.npu.memory_allocated() == base + N * 4
    assert torch.npu.memory_allocated(0) == torch.npu.memory_allocated("npu:0")
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()
    del x
    settle()
    assert torch.npu.memory_allocated() == base


def test_memory_allocated_per_device():
    settle()
    base0, base1 = torch.npu.memory_allocated(0), torch.npu.memory_allocated(1)
    x = torch.empty(N, device="npu:1")
    assert torch.npu.memory_allocated(1) == base1 + N * 4
    assert torch.npu.memory_allocated(0) == base0
    del x


def test_peak_stats_and_reset():
    settle()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    assert torch.npu.max_memory_allocated() == base
    x = torch.empty(4 * N, device="npu")
    del x
    settle()
    assert torch.npu.max_memory_allocated() >= base + 16 * N
    assert torch.npu.max_memory_reserved() >= base + 16 * N
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
    assert torch.npu.max_memory_reserved() == torch.npu.memory_reserved()


def test_empty_cache_releases_cached_blocks():
    settle()
    x = torch.empty(8 * N, device="npu")
    del x
    settle()
    cached = torch.npu.memory_reserved() - torch.npu.memory_allocated()
    assert cached >= 32 * N
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() - torch.npu.memory_allocated() < cached


def test_memory_stats_keys_and_summary():
    x = torch.empty(N, device="npu")
    stats = torch.npu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak", "num_ooms"):
        assert key in stats and isinstance(stats[key], int)
    assert stats["allocated_bytes.all.current"] >= N * 4
    summary = torch.npu.memory_summary()
    assert isinstance(summary, str) and "device ID 0" in summary and "Allocated memory" in summary
    assert "device ID 1" in torch.npu.memory_summary(device=1)
    del x


def test_out_of_memory_raises_and_device_stays_usable():
    settle()
    ooms = torch.npu.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match=r"Tried to allocate 9\.00 GiB.*8\.00 GiB total capacity"):
        torch.empty(9 * 1024 ** 3, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_stats()["num_ooms"] == ooms + 1
    x = torch.ones(1000, device="npu")
    assert x.sum().item() == 1000
    big = torch.empty(1024 ** 3, dtype=torch.uint8, device="npu")  # 1 GiB still fits
    assert big.numel() == 1024 ** 3
    del big


def test_out_of_memory_is_a_runtime_error_too():
    with pytest.raises(RuntimeError, match="out of memory"):
        torch.empty(20 * 1024 ** 3, dtype=torch.uint8, device="npu:1")
    assert torch.ones(3, device="npu:1").sum().item() == 3


def test_oom_from_an_op_output():
    x = torch.ones(1, device="npu")
    with pytest.raises(torch.OutOfMemoryError):
        x.expand(3 * 1024 ** 3).contiguous()  # 12 GiB output
    assert (x + 1).item() == 2


def test_cached_memory_released_before_oom():
    # Fill most of the capacity with cached (freed) blocks; a large request
    # must release them and succeed rather than raise.
    settle()
    blocks = [torch.empty(1024 ** 3, dtype=torch.uint8, device="npu:1") for _ in range(6)]
    del blocks
    settle()
    big = torch.empty(7 * 1024 ** 3 // 2, dtype=torch.uint8, device="npu:1")
    del big
    torch.npu.empty_cache()


def test_pinned_memory_round_trip():
    p = torch.randn(1000).pin_memory()
    assert p.is_pinned()
    n = p.to("npu", non_blocking=True)
    q = torch.empty(1000, pin_memory=True)
    q.copy_(n, non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(q, p)
