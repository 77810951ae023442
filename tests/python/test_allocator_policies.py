"""Allocator policies beyond the defaults: MemPool(use_on_oom, no_split),
pool snapshots and pool ids in the history, throw_on_npumalloc_oom with
num_oom_rejections, max_non_split_rounding_mb, roundup_power2_divisions,
graph_pool_handle ids and out-of-memory observers.

Every test runs on device 1 (other files leave tensors on device 0) and puts
the process-wide settings it changes back.
"""

import gc

import pytest
import torch

from conftest import run_py, run_py_ok

MiB = 1 << 20
DEFAULTS = "throw_on_npumalloc_oom:False,per_process_memory_fraction:1.0"


@pytest.fixture(name="dev")
def _dev():
    gc.collect()
    torch.npu.synchronize(1)
    torch.npu.empty_cache()
    with torch.npu.device(1):
        yield 1
    gc.collect()
    torch.npu.memory._set_allocator_settings(DEFAULTS)
    torch.npu.set_per_process_memory_fraction(1.0, 1)
    torch.npu.synchronize(1)
    torch.npu.empty_cache()


def limit_to(extra_mib, device=1):
    """Caps device's reserved memory at what it holds now plus extra_mib."""
    total = torch.npu.mem_get_info(device)[1]
    allowed = torch.npu.memory_reserved(device) + extra_mib * MiB
    torch.npu.set_per_process_memory_fraction(allowed / total, device)


def test_use_on_oom_pool_serves_allocations_that_find_no_memory(dev):
    fallback = torch.npu.MemPool(use_on_oom=True)
    other = torch.npu.MemPool()
    limit_to(44)
    with torch.npu.use_mem_pool(other):
        a = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
    with torch.npu.use_mem_pool(fallback):
        b = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
    b_ptr = b.data_ptr()
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
    del a, b
    retries = torch.npu.memory_stats()["num_alloc_retries"]
    c = torch.empty(12 * MiB, dtype=torch.uint8, device="npu")  # from the fallback pool's block
    assert c.data_ptr() == b_ptr
    assert torch.npu.memory_stats()["num_alloc_retries"] == retries  # nothing was released
    with pytest.raises(torch.OutOfMemoryError):  # `other` is no fallback
        torch.empty(12 * MiB, dtype=torch.uint8, device="npu")
    del c, fallback, other


def test_a_deleted_use_on_oom_pool_is_no_fallback(dev):
    limit_to(24)
    pool = torch.npu.MemPool(use_on_oom=True)
    with torch.npu.use_mem_pool(pool):
        a = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
    del a, pool
    # The deleted pool's segment is released by the out-of-memory retry,
    # which then finds room: the allocation is not served from the dead pool.
    b = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_stats()["num_alloc_retries"] >= 1
    assert all(tuple(s["segment_pool_id"]) == (0, 0)
               for s in torch.npu.memory_snapshot() if s["address"] == b.data_ptr())
    del b


def test_no_split_pool_keeps_one_block_per_segment(dev):
    split, no_split = torch.npu.MemPool(), torch.npu.MemPool(no_split=True)
    kept = []
    for pool in (split, no_split):
        with torch.npu.use_mem_pool(pool):
            kept += [torch.empty(4 * MiB, dtype=torch.uint8, device="npu") for _ in range(2)]
    s, n = split.snapshot(), no_split.snapshot()
    assert len(s) == 1 and len(s[0]["blocks"]) == 3  # two tensors and the rest of 20 MiB
    assert len(n) == 2 and all(len(seg["blocks"]) == 1 for seg in n)
    assert all(seg["total_size"] == 20 * MiB for seg in n)
    del kept


def test_snapshots_and_history_name_the_pool(dev):
    pool = torch.npu.MemPool()
    outside = torch.empty(1024, device="npu")
    torch.npu.memory._record_memory_history("all")
    try:
        with torch.npu.use_mem_pool(pool):
            x = torch.empty(1024, device="npu")
        snap = torch.npu.memory._snapshot()
    finally:
        torch.npu.memory._record_memory_history(None)
    mine = torch.npu.memory_snapshot(pool.id)
    assert mine == pool.snapshot() and len(mine) == 1
    assert tuple(mine[0]["segment_pool_id"]) == pool.id
    allocs = [e for e in snap["device_traces"][1] if e["action"] == "alloc"]
    assert [tuple(e["pool_id"]) for e in allocs if e["addr"] == x.data_ptr()] == [pool.id]
    with pytest.raises(TypeError, match="mempool_id must be a pair of ints"):
        torch.npu.memory_snapshot("pool")
    del x, outside


def test_graph_pool_handles_and_mem_pools_share_one_id_counter():
    a = torch.npu.graph_pool_handle()
    b = torch.npu.MemPool().id
    c = torch.npu.graph_pool_handle()
    assert a[0] == b[0] == c[0] == 0
    assert a[1] < b[1] < c[1]


def test_throw_on_npumalloc_oom_refuses_at_once_and_counts(dev):
    torch.npu.reset_accumulated_memory_stats(1)
    total = torch.npu.mem_get_info(1)[1]
    fraction = (torch.npu.memory_reserved(1) + 30 * MiB) / total
    torch.npu.memory._set_allocator_settings(
        f"throw_on_npumalloc_oom:True,per_process_memory_fraction:{fraction}")
    small = torch.empty(10 * MiB, dtype=torch.uint8, device="npu")  # fits: no rejection
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    cached = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")  # from small's segment
    with pytest.raises(torch.OutOfMemoryError, match="Preemptively rejected a 40.00 MiB segment"):
        torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
    s = torch.npu.memory_stats()
    assert s["num_oom_rejections"] == 1
    assert s["num_alloc_retries"] == 0 and s["num_ooms"] == 0  # no release, no retry
    torch.npu.reset_accumulated_memory_stats(1)
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    torch.npu.memory._set_allocator_settings("throw_on_npumalloc_oom:False")
    big = torch.empty(40 * MiB, dtype=torch.uint8, device="npu")  # no fraction set: fine
    del small, cached, big


def test_max_non_split_rounding_mb():
    # In its own process: max_split_size_mb cannot be set back to unlimited.
    out = run_py_ok(
        """
        import torch, torch_npu
        MiB = 1 << 20
        for rounding in (20, 30):
            torch.npu.memory._set_allocator_settings(
                f"max_split_size_mb:50,max_non_split_rounding_mb:{rounding}")
            big = torch.empty(100 * MiB, dtype=torch.uint8, device="npu")
            del big  # cached, unsplittable (>= max_split_size)
            before = torch.npu.memory_reserved()
            smaller = torch.empty(75 * MiB, dtype=torch.uint8, device="npu")
            print((torch.npu.memory_reserved() - before) // MiB)
            del smaller
            torch.npu.empty_cache()
        """
    )
    # 100 MiB is 25 MiB more than asked: taken only if the rounding allows 25 MiB;
    # otherwise a new segment, 75 MiB rounded up to 2 MiB.
    assert out.split() == ["76", "0"]


@pytest.mark.parametrize("conf, sizes", [
    # One rule for every size: 4 steps between powers of two.
    ("roundup_power2_divisions:4", [(513, 1024), (5 * MiB + 1, 6 * MiB),
                                    (3 * MiB, 3 * MiB), (4 * MiB, 4 * MiB), (100, 512),
                                    (1500, 1536)]),
    # Per interval: the first entry covers the smaller ones, the intervals
    # between entries round plainly, ">" covers the rest.
    ("roundup_power2_divisions:[8:1,64:4,128:8,256:2,>:16]",
     # 33 MiB rounds plainly; its segment (34 MiB, 2 MiB granules) is not
     # split for a 1 MiB rest, so the whole segment is allocated.
     [(33 * MiB, 34 * MiB), (65 * MiB, 80 * MiB), (200 * MiB, 208 * MiB),
      (510 * MiB, 512 * MiB), (513 * MiB, 544 * MiB), (5 * MiB + 1, 5 * MiB + 512)]),
])
def test_roundup_power2_divisions_rounds_requests_to_size_classes(conf, sizes):
    # In its own process: the allocated bytes of one tensor at a time.
    out = run_py_ok(
        f"""
        import torch, torch_npu
        torch.npu.memory._set_allocator_settings({conf!r})
        for nbytes in {[n for n, _ in sizes]!r}:
            x = torch.empty(nbytes, dtype=torch.uint8, device="npu")
            print(torch.npu.memory_stats()["allocated_bytes.all.current"])
            del x
        """
    )
    assert [int(v) for v in out.split()] == [rounded for _, rounded in sizes]


def test_out_of_memory_observers_see_the_failed_request():
    # In its own process: observers stay attached for the life of the process.
    p = run_py(
        """
        import torch, torch_npu
        MiB = 1 << 20
        seen = []
        torch_npu._C._npu_attach_out_of_memory_observer(lambda *args: seen.append(args))
        torch_npu._C._npu_attach_out_of_memory_observer(lambda *args: 1 / 0)  # reported, ignored
        total = torch.npu.mem_get_info(0)[1]
        torch.npu.set_per_process_memory_fraction(10 * MiB / total)
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError:
            print("oom")
        device, requested, device_total, device_free = seen[0]
        print(len(seen), device, requested == 40 * MiB, device_total == total,
              0 < device_free <= total)
        try:
            torch_npu._C._npu_attach_out_of_memory_observer(None)
        except TypeError:
            print("TypeError")
        """
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["oom", "1", "0", "True", "True", "True", "TypeError"]
    assert "ZeroDivisionError" in p.stderr and "an npu out-of-memory observer" in p.stderr


def test_deleting_a_mem_pool_returns_its_cached_segments(dev):
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        t = torch.empty(64 * MiB, dtype=torch.uint8, device="npu")
    del t
    torch.npu.empty_cache()  # the live pool keeps its free segment
    kept = torch.npu.memory_reserved(dev)
    assert kept >= 64 * MiB
    del pool
    gc.collect()
    assert torch.npu.memory_reserved(dev) <= kept - 64 * MiB


def test_a_pool_still_used_by_a_graph_keeps_its_memory_when_its_mem_pool_is_deleted(dev):
    pool = torch.npu.MemPool()
    x = torch.ones(1024, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph, pool=pool.id):
        y = x * 2
    del pool
    gc.collect()
    x.fill_(3)
    graph.replay()
    torch.npu.synchronize()
    assert torch.equal(y.cpu(), torch.full((1024,), 6.0))
