"""The allocator on PyTorch's interface (issue 12): torch.accelerator.memory_*
on npu, CUDA's full memory_stats key set with exact counts, memory_summary in
torch_npu's layout, mem_get_info, the per-process memory fraction,
caching_allocator_alloc/delete, the deprecated aliases, allocator settings
and PYTORCH_NPU_ALLOC_CONF, MemPool/use_mem_pool, get_allocator_backend,
host_memory_stats, OutOfMemoryError, the 1EB refusal, and record_stream'd
blocks freed before out-of-memory. test_memory.py covers stream-aware reuse."""

import collections
import gc
import itertools
import threading

import pytest
import torch
import torch_npu

from conftest import run_py, run_py_ok

KINDS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
         "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "small_pool", "large_pool")
METRICS = ("current", "peak", "allocated", "freed")
COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
            "num_device_free", "max_split_size",
            "num_oom_rejections")  # torch_npu's, beyond CUDA's key set
MiB = 1 << 20


def expected_keys():
    keys = {f"{k}.{p}.{m}" for k, p, m in itertools.product(KINDS, POOLS, METRICS)}
    keys |= {f"{k}.{m}" for k in ("oversize_allocations", "oversize_segments") for m in METRICS}
    return keys | set(COUNTERS)


class Baseline:
    """Device 1's statistics when the test began: other test files may leave
    tensors there, so tests compare differences. Tests that count segments
    allocate in a private pool of their own (Note [Private memory pools]),
    which never shares a segment with what others left."""

    def __init__(self, device):
        self.device = device
        self.stats = torch.npu.memory_stats(device)

    def __call__(self, key):
        return torch.npu.memory_stats(self.device)[key] - self.stats[key]


@pytest.fixture(name="clean")
def _clean():
    gc.collect()
    torch.npu.synchronize(1)
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats(1)
    torch.npu.reset_accumulated_memory_stats(1)
    yield Baseline(1)
    gc.collect()
    torch.npu.empty_cache()


def test_memory_stats_has_cuda_key_set_as_ordered_dict():
    stats = torch.npu.memory_stats()
    assert isinstance(stats, collections.OrderedDict)
    assert set(stats) == expected_keys()
    assert list(stats) == sorted(stats)
    assert all(isinstance(v, int) for v in stats.values())
    assert stats["max_split_size"] == -1  # unlimited, as CUDA reports it
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == stats["allocated_bytes.all.current"]


def test_counts_are_exact_for_small_and_large_blocks(clean):
    d, delta = clean.device, clean
    with torch.npu.device(d):
        pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool, device=d):
        a = torch.empty(1000, dtype=torch.uint8, device=f"npu:{d}")  # 1024 B, small pool
        b = torch.empty(3 * MiB + 1, dtype=torch.uint8, device=f"npu:{d}")  # large, 20 MiB segment
    assert delta("allocated_bytes.all.current") == 1024 + 3 * MiB + 512
    assert delta("allocated_bytes.small_pool.current") == 1024
    assert delta("requested_bytes.all.current") == 1000 + 3 * MiB + 1
    assert delta("reserved_bytes.small_pool.current") == 2 * MiB
    assert delta("reserved_bytes.large_pool.current") == 20 * MiB
    assert delta("segment.all.current") == 2 and delta("num_device_alloc") == 2
    assert delta("allocation.all.current") == 2 and delta("allocation.all.allocated") == 2
    assert delta("active.all.current") == 2
    assert delta("inactive_split.all.current") == 2  # the rest of each segment
    assert delta("inactive_split_bytes.all.current") == (2 * MiB - 1024) + (20 * MiB - 3 * MiB - 512)
    del a, b
    torch.npu.synchronize(d)
    assert delta("allocated_bytes.all.current") == 0
    assert delta("allocated_bytes.all.freed") == 1024 + 3 * MiB + 512
    assert delta("inactive_split.all.current") == 0  # merged back into whole segments
    assert delta("active_bytes.all.current") == 0 and delta("requested_bytes.all.current") == 0
    del pool  # its segments are released by the next empty_cache
    gc.collect()
    torch.npu.empty_cache()
    assert delta("reserved_bytes.all.current") == 0 and delta("reserved_bytes.all.peak") == 22 * MiB
    assert delta("num_device_free") == 2 and delta("segment.all.freed") == 2


def test_active_counts_blocks_awaiting_other_streams(clean, gate):
    d, delta = clean.device, clean
    side = torch.npu.Stream(device=d)
    x = torch.empty(1024, dtype=torch.uint8, device=f"npu:{d}")
    g = gate(side)
    x.record_stream(side)
    del x
    assert delta("allocated_bytes.all.current") == 0
    assert delta("active_bytes.all.current") == 1024  # freed, but side may still use it
    g.release()
    side.synchronize()
    torch.npu.empty_cache()
    assert delta("active_bytes.all.current") == 0


def test_torch_accelerator_memory_functions_work_on_npu(clean):
    d, base = clean.device, clean.stats
    assert torch.accelerator.current_accelerator().type == "npu"
    with torch.accelerator.device_index(d):
        pool = torch.npu.MemPool()
        with torch.npu.use_mem_pool(pool):
            x = torch.empty(4096, dtype=torch.uint8, device=f"npu:{d}")
        allocated0, reserved0 = base["allocated_bytes.all.current"], base["reserved_bytes.all.current"]
        assert torch.accelerator.memory_allocated(d) == allocated0 + 4096
        assert torch.accelerator.max_memory_allocated(d) == allocated0 + 4096
        assert torch.accelerator.memory_reserved(d) == reserved0 + 2 * MiB
        assert torch.accelerator.max_memory_reserved(d) == reserved0 + 2 * MiB
        npu_stats = torch.npu.memory_stats(d)
        assert npu_stats.pop("num_oom_rejections") == 0  # torch_npu's key, not c10's
        assert torch.accelerator.memory_stats(d) == npu_stats
        free, total = torch.accelerator.get_memory_info(d)
        assert (free, total) == torch.npu.mem_get_info(d)
        del x, pool
        gc.collect()
        torch.accelerator.empty_cache()
        assert torch.accelerator.memory_reserved(d) == reserved0
        torch.accelerator.reset_peak_memory_stats(d)
        assert torch.accelerator.max_memory_allocated(d) == allocated0
        torch.accelerator.reset_accumulated_memory_stats(d)
        assert torch.accelerator.memory_stats(d)["allocation.all.allocated"] == 0


def test_mem_get_info_sees_reserved_memory(clean):
    d = clean.device
    free0, total = torch.npu.mem_get_info(d)
    assert total == torch.npu.get_device_properties(d).total_memory
    x = torch.empty(50 * MiB, dtype=torch.uint8, device=f"npu:{d}")
    free1, _ = torch.npu.mem_get_info(d)
    assert free0 - free1 == 50 * MiB
    del x


def test_memory_summary_has_torch_npu_layout(clean):
    d = clean.device
    x = torch.empty(1000, device=f"npu:{d}")
    text = torch.npu.memory_summary(d)
    lines = text.splitlines()
    assert all(len(line) == 77 and line[0] == line[-1] == "|" for line in lines), text
    assert f"PyTorch NPU memory summary, device ID {d}" in text
    for name in ("Allocated memory", "Active memory", "NPU reserved memory", "Non-releasable memory",
                 "Allocations", "Active allocs", "NPU reserved segments", "Non-releasable allocs",
                 "Oversize allocations", "Oversize NPU segments", "NPU OOMs", "npuMalloc retries"):
        assert name in text
    assert "from large pool" in text and "from small pool" in text
    short = torch.npu.memory_summary(d, abbreviated=True)
    assert "from large pool" not in short and "Allocated memory" in short
    del x


def test_per_process_memory_fraction_is_enforced(clean):
    d = clean.device
    assert torch.npu.get_per_process_memory_fraction(d) == 1.0
    total = torch.npu.get_device_properties(d).total_memory
    try:
        torch.npu.set_per_process_memory_fraction(100 * MiB / total, d)
        keep = torch.empty(80 * MiB, dtype=torch.uint8, device=f"npu:{d}")
        with pytest.raises(torch.npu.OutOfMemoryError, match="per-process memory fraction"):
            torch.empty(30 * MiB, dtype=torch.uint8, device=f"npu:{d}")
        del keep
        torch.empty(30 * MiB, dtype=torch.uint8, device=f"npu:{d}")  # fits once freed
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, d)


@pytest.mark.parametrize("bad, error, text", [
    (1.5, ValueError, "Invalid fraction value: 1.5"),
    (-0.1, ValueError, "Invalid fraction value: -0.1"),
    ("0.5", TypeError, "must be `float`, but got str"),
    (1, TypeError, "must be `float`, but got int"),
])
def test_bad_memory_fraction(bad, error, text):
    with pytest.raises(error, match=text):
        torch.npu.set_per_process_memory_fraction(bad)
    assert torch.npu.get_per_process_memory_fraction() == 1.0


def test_caching_allocator_alloc_and_delete(clean):
    d, delta = clean.device, clean
    side = torch.npu.Stream(device=d)
    ptr = torch.npu.caching_allocator_alloc(1000, d, side)
    assert isinstance(ptr, int) and ptr != 0
    assert delta("allocated_bytes.all.current") == 1024
    torch.npu.caching_allocator_delete(ptr)
    assert delta("allocated_bytes.all.current") == 0
    with pytest.raises(RuntimeError, match="not a live allocation"):
        torch.npu.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="Invalid type for stream"):
        torch.npu.caching_allocator_alloc(10, d, 12345)
    with pytest.raises(ValueError, match="size in bytes"):
        torch.npu.caching_allocator_alloc(-1, d)
    ptr = torch.npu.caching_allocator_alloc(10)  # current device and stream
    torch.npu.caching_allocator_delete(ptr)


def test_deprecated_aliases():
    with pytest.warns(DeprecationWarning):
        assert torch.npu.memory_cached() == torch.npu.memory_reserved()
    with pytest.warns(DeprecationWarning):
        assert torch.npu.max_memory_cached() == torch.npu.max_memory_reserved()
    x = torch.empty(1 << 16, device="npu")
    del x
    with pytest.warns(FutureWarning):
        torch.npu.reset_max_memory_allocated()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
    with pytest.warns(FutureWarning):
        torch.npu.reset_max_memory_cached()
    assert torch.npu.max_memory_reserved() == torch.npu.memory_reserved()


def test_allocator_backend_and_host_stats():
    assert torch.npu.get_allocator_backend() == "native"
    t = torch.empty(1000).pin_memory()
    stats = torch.npu.host_memory_stats()
    assert {"allocated_bytes.current", "active_bytes.current", "num_host_alloc",
            "num_host_free"} <= set(stats)
    assert stats["active_bytes.current"] >= 4096 and stats["num_host_alloc"] >= 1
    del t
    torch.npu.host_empty_cache()
    after = torch.npu.host_memory_stats()
    assert after["num_host_free"] > stats["num_host_free"]
    assert after["allocated_bytes.current"] < stats["allocated_bytes.current"]


def test_out_of_memory_error_type_and_1eb_message():
    assert torch.npu.OutOfMemoryError is torch.OutOfMemoryError
    assert issubclass(torch_npu.npu.OutOfMemoryError, RuntimeError)
    with pytest.raises(torch.npu.OutOfMemoryError,
                       match=r"NPU out of memory\. Tried to allocate more than 1EB memory\."):
        torch.empty(1 << 60, dtype=torch.uint8, device="npu")
    assert torch.ones(2, device="npu").sum().item() == 2


def test_record_stream_blocks_are_freed_before_out_of_memory():
    # torch_npu's test_caching_allocator_record_stream_oom, on a 1 GiB device:
    # each 160 MB block is recorded on a busy side stream; allocation must
    # wait for those blocks' events instead of raising.
    out = run_py_ok(
        """
        import torch, torch_npu
        stream = torch.npu.Stream()
        with torch.npu.stream(stream):
            y = torch.zeros(40 * 1024 * 1024, device="npu")
        for _ in range(20):
            x = torch.empty(40 * 1024 * 1024, device="npu")
            with torch.npu.stream(stream):
                y += x
            x.record_stream(stream)
            del x
        s = torch.npu.memory_stats()
        print(s["num_ooms"], s["num_alloc_retries"] > 0)
        torch.npu.empty_cache()
        """,
        env={"NPU_SIM_MEMORY_MB": "1024"},
        timeout=180,
    )
    assert out.split() == ["0", "True"]


def test_allocator_settings_max_split_size():
    out = run_py_ok(
        """
        import torch, torch_npu
        torch.npu.memory._set_allocator_settings("max_split_size_mb:32")
        print(torch.npu.memory_stats()["max_split_size"])
        x = torch.empty(40 << 20, dtype=torch.uint8, device="npu")
        s = torch.npu.memory_stats()
        print(s["oversize_allocations.current"], s["oversize_segments.current"])
        """
    )
    assert out.split() == [str(32 << 20), "1", "1"]


def test_split_limit_may_equal_the_large_segment_size():
    # c10's rule: max_split_size_mb >= large_segment_size_mb (20 by default).
    out = run_py_ok(
        """
        import torch, torch_npu
        torch.npu.memory._set_allocator_settings("max_split_size_mb:20")
        print(torch.npu.memory_stats()["max_split_size"])
        torch.npu.memory._set_allocator_settings("large_segment_size_mb:11,max_split_size_mb:15")
        print(torch.npu.memory_stats()["max_split_size"])
        """
    )
    assert out.split() == [str(20 << 20), str(15 << 20)]


@pytest.mark.parametrize("conf, text", [
    ("max_split_size_mb:abc", "max_split_size_mb expects a whole number of MiB, but got 'abc'"),
    ("max_split_size_mb:4", "max_split_size_mb too small, must be >= 20"),
    ("max_split_size_mb:19", "max_split_size_mb too small, must be >= 20"),
    ("large_segment_size_mb:50,max_split_size_mb:30", "max_split_size_mb too small, must be >= 50"),
    ("max_split_size_mb:30,large_segment_size_mb:50", "max_split_size_mb too small, must be >= 50"),
    ("garbage_collection_threshold:2", r"garbage_collection_threshold must be in \(0.0, 1.0\), but got 2"),
    ("expandable_segments:yes", "expandable_segments expects True or False, but got 'yes'"),
    ("throw_on_npumalloc_oom:maybe", "throw_on_npumalloc_oom expects True or False, but got 'maybe'"),
    ("max_non_split_rounding_mb:-3", "max_non_split_rounding_mb expects a whole number of MiB"),
    ("no_such_option:1", "Unrecognized key 'no_such_option'"),
    ("max_split_size_mb", "expected 'key:value', but got 'max_split_size_mb'"),
    ("large_segment_size_mb:10", "large_segment_size_mb must be > 10 MB, but got 10"),
    ("large_segment_size_mb:big", "large_segment_size_mb expects a whole number of MiB"),
    ("segment_size_mb:19", r"segment_size_mb error, must be \[20, 512\], dtype is int"),
    ("segment_size_mb:513", r"segment_size_mb error, must be \[20, 512\], dtype is int"),
    ("segment_size_mb:1.5", "CachingAllocator option segment_size_mb is invalid"),
    ("roundup_power2_divisions:3", "For roundups, the divisions has to be power of 2 , but got 3"),
    ("roundup_power2_divisions:[64:4,>:6]", "For roundups, the divisions has to be power of 2 , but got 6"),
    ("roundup_power2_divisions:[48:4]", "For roundups, the intervals have to be power of 2, but got '48'"),
    ("roundup_power2_divisions:[256:4,64:2]", "intervals must ascend, but got '64'"),
    ("roundup_power2_divisions:[64:4", "expects a number or a list"),
    ("roundup_power2_divisions:[64]", "expects '<MiB>:<divisions>' entries, but got '64'"),
])
def test_bad_allocator_settings_name_the_value(conf, text):
    # RuntimeError, as torch_npu's and CUDA's parsers raise.
    with pytest.raises(RuntimeError, match=text):
        torch.npu.memory._set_allocator_settings(conf)
    with pytest.raises(TypeError):
        torch.npu.memory._set_allocator_settings(32)


def test_alloc_conf_environment_variable_is_honoured():
    out = run_py_ok(
        """
        import torch, torch_npu
        print(torch.npu.memory_stats()["max_split_size"])
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:64,garbage_collection_threshold:0.6"},
    )
    assert out.split() == [str(64 << 20)]
    p = run_py(
        """
        import torch, torch_npu
        torch.empty(4, device="npu")
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:lots"},
    )
    assert p.returncode != 0 and "but got 'lots'" in p.stderr


def test_garbage_collection_threshold_releases_cached_segments():
    out = run_py_ok(
        """
        import torch, torch_npu
        total = torch.npu.get_device_properties(0).total_memory
        torch.npu.set_per_process_memory_fraction(100 * 2**20 / total)
        x = torch.empty(40 << 20, dtype=torch.uint8, device="npu")
        del x
        y = torch.empty(50 << 20, dtype=torch.uint8, device="npu")
        s = torch.npu.memory_stats()
        print(s["num_alloc_retries"], s["reserved_bytes.all.current"] >> 20)
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "garbage_collection_threshold:0.5"},
    )
    assert out.split() == ["0", "50"]


def test_mem_pool_routes_this_threads_allocations(clean):
    d, delta = clean.device, clean
    with torch.npu.device(d):
        pool = torch.npu.MemPool()
    assert isinstance(pool.id, tuple) and len(pool.id) == 2
    assert pool.use_count() == 1
    with torch.npu.use_mem_pool(pool, device=d):
        assert pool.use_count() == 2
        inside = torch.empty(1024, dtype=torch.uint8, device=f"npu:{d}")
        seen = {}
        worker = threading.Thread(
            target=lambda: seen.update(p=torch.empty(1024, dtype=torch.uint8, device=f"npu:{d}").data_ptr()))
        worker.start()
        worker.join()
    assert pool.use_count() == 1
    ptr = inside.data_ptr()
    assert seen["p"] != ptr
    del inside
    outside = torch.empty(1024, dtype=torch.uint8, device=f"npu:{d}")
    assert outside.data_ptr() != ptr  # the pool's block is never handed out elsewhere
    del outside
    torch.npu.empty_cache()
    assert delta("reserved_bytes.all.current") == 2 * MiB  # the pool is still alive
    del pool
    gc.collect()
    torch.npu.empty_cache()
    assert delta("reserved_bytes.all.current") == 0


def test_mem_pool_bad_arguments():
    with pytest.raises(TypeError, match="expects a MemPool"):
        with torch.npu.use_mem_pool(object()):
            pass
    with pytest.raises(TypeError, match="no_split must be a bool"):
        torch.npu.MemPool(no_split="yes")
