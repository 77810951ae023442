"""The pinned host allocator's statistics (torch.cuda.host_memory_stats's keys
and meaning), their resets, and c10's pinned_max_round_threshold_mb /
pinned_max_cached_size_mb policies.

Statistics are process-wide: every test starts from an emptied cache and
compares against what it saw before its own allocations.
"""

import gc

import pytest
import torch
import torch_npu

from conftest import run_py_ok

MiB = 1 << 20
UNLIMITED = "pinned_max_round_threshold_mb:18446744073709551615,pinned_max_cached_size_mb:18446744073709551615"
STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")


@pytest.fixture(autouse=True)
def _clean_cache():
    gc.collect()
    torch.npu.synchronize()
    torch.npu.host_empty_cache()
    yield
    gc.collect()
    torch_npu.npu.memory._set_allocator_settings(UNLIMITED)
    torch.npu.synchronize()
    torch.npu.host_empty_cache()


def stats():
    return torch.npu.host_memory_stats()


def pinned(nbytes):
    return torch.empty(nbytes, dtype=torch.uint8).pin_memory()


def test_keys_are_torch_cuda_host_memory_stats_keys():
    keys = set(stats())
    expected = {f"{s}.{m}" for s in STATS for m in ("current", "peak", "allocated", "freed")}
    expected |= {f"{t}.{m}" for t in ("host_alloc_time", "host_free_time")
                 for m in ("total", "max", "min", "count", "avg")}
    expected |= {"num_host_alloc", "num_host_free"}
    assert keys == expected
    nested = torch.npu.host_memory_stats_as_nested_dict()
    assert nested["allocations"]["current"] == stats()["allocations.current"]
    assert list(stats()) == sorted(stats())


def test_allocation_reuse_and_empty_cache_move_each_statistic():
    before = stats()
    t = pinned(40 * 1024)  # rounded to 64 KiB
    s = stats()
    for name in ("allocations", "active_requests"):
        assert s[f"{name}.current"] == before[f"{name}.current"] + 1
        assert s[f"{name}.allocated"] == before[f"{name}.allocated"] + 1
    for name in ("allocated_bytes", "active_bytes"):
        assert s[f"{name}.current"] == before[f"{name}.current"] + 64 * 1024
    assert s["num_host_alloc"] == before["num_host_alloc"] + 1
    assert s["host_alloc_time.count"] == before["host_alloc_time.count"] + 1

    del t  # no copy used it: reusable at once, and cached
    s = stats()
    assert s["active_requests.current"] == before["active_requests.current"]
    assert s["active_bytes.freed"] == before["active_bytes.freed"] + 64 * 1024
    assert s["allocations.current"] == before["allocations.current"] + 1

    t = pinned(50 * 1024)  # same size class: the cached block, no new runtime allocation
    s2 = stats()
    assert s2["num_host_alloc"] == s["num_host_alloc"]
    assert s2["allocations.allocated"] == s["allocations.allocated"]
    assert s2["active_requests.allocated"] == s["active_requests.allocated"] + 1
    del t
    torch.npu.host_empty_cache()
    s3 = stats()
    assert s3["allocations.current"] == before["allocations.current"]
    assert s3["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert s3["num_host_free"] == before["num_host_free"] + 1
    assert s3["host_free_time.count"] == before["host_free_time.count"] + 1
    assert s3["allocations.peak"] >= before["allocations.current"] + 1


def test_a_block_read_by_a_queued_copy_stays_active_until_the_copy_ran(gate):
    stream = torch.npu.Stream()
    before = stats()
    t = pinned(1000).fill_(7)
    g = gate(stream)
    with torch.npu.stream(stream):
        dst = t.to("npu", non_blocking=True)
    del t
    # The tensor is gone but the copy has not run: the block is still active.
    assert stats()["active_requests.current"] == before["active_requests.current"] + 1
    g.release()
    stream.synchronize()
    pinned(1000)  # an allocation settles the blocks whose copies completed
    s = stats()
    assert s["active_requests.freed"] >= before["active_requests.freed"] + 1
    assert s["allocations.current"] == before["allocations.current"] + 1  # reused, not a new one
    assert dst.sum().item() == 7000


def test_peak_and_accumulated_resets():
    a = pinned(MiB)
    b = pinned(2 * MiB)
    del b
    torch.npu.host_empty_cache()
    s = stats()
    assert s["allocated_bytes.peak"] >= s["allocated_bytes.current"] + 2 * MiB
    assert s["host_alloc_time.count"] >= 2

    torch.npu.reset_peak_host_memory_stats()
    s = stats()
    for name in STATS:
        assert s[f"{name}.peak"] == s[f"{name}.current"]
    assert s["host_alloc_time.max"] == 0 and s["host_alloc_time.min"] == 0

    torch.npu.reset_accumulated_host_memory_stats()
    s = stats()
    for name in STATS:
        assert s[f"{name}.allocated"] == 0 and s[f"{name}.freed"] == 0
    assert s["host_alloc_time.count"] == 0 and s["host_free_time.total"] == 0
    assert s["allocations.current"] >= 1  # resets never touch current values
    del a


def test_round_threshold_keeps_large_requests_at_their_exact_size():
    torch_npu.npu.memory._set_allocator_settings("pinned_max_round_threshold_mb:1")
    before = stats()["allocated_bytes.current"]
    small = pinned(MiB - 4096)  # at most the threshold: a power of two
    large = pinned(MiB + 4096)  # above it: exact
    assert stats()["allocated_bytes.current"] - before == MiB + (MiB + 4096)
    del small, large


def test_cached_size_limit_returns_large_blocks_once_reusable(gate):
    torch_npu.npu.memory._set_allocator_settings("pinned_max_cached_size_mb:1")
    before = stats()
    small = pinned(1000)
    large = pinned(3 * MiB)  # above the limit: exact size, not cached
    assert stats()["allocated_bytes.current"] - before["allocated_bytes.current"] == 1024 + 3 * MiB
    del small, large
    s = stats()
    assert s["allocated_bytes.current"] - before["allocated_bytes.current"] == 1024  # small is cached
    assert s["num_host_free"] == before["num_host_free"] + 1

    # A large block a queued copy reads is returned once the copy ran.
    stream = torch.npu.Stream()
    large = pinned(3 * MiB)
    g = gate(stream)
    with torch.npu.stream(stream):
        large.to("npu", non_blocking=True)
    del large
    assert stats()["allocated_bytes.current"] - before["allocated_bytes.current"] == 1024 + 3 * MiB
    g.release()
    stream.synchronize()
    torch.npu.host_empty_cache()
    assert stats()["allocated_bytes.current"] == before["allocated_bytes.current"]


@pytest.mark.parametrize("option", ["pinned_max_round_threshold_mb", "pinned_max_cached_size_mb"])
def test_bad_threshold_values_are_refused_and_change_nothing(option):
    with pytest.raises(RuntimeError, match=f"{option} expects a whole number of MiB, but got '-1'"):
        torch_npu.npu.memory._set_allocator_settings(f"{option}:-1")
    before = stats()["allocated_bytes.current"]
    t = pinned(3 * MiB)
    assert stats()["allocated_bytes.current"] - before == 4 * MiB  # still rounded
    del t


def test_thresholds_from_the_environment_and_expandable_pinned_memory_turned_off():
    out = run_py_ok(
        """
        import gc, warnings, torch, torch_npu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = torch.empty(3 << 20, dtype=torch.uint8).pin_memory()
        print(torch.npu.host_memory_stats()["allocated_bytes.current"])
        del t
        gc.collect()
        print(torch.npu.host_memory_stats()["allocated_bytes.current"])
        print(any("pin_memory_expandable_segments setting failure" in str(w.message) for w in caught))
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "pinned_max_cached_size_mb:2,pin_memory_expandable_segments:True"},
    )
    assert out.split() == [str(3 << 20), "0", "True"]
