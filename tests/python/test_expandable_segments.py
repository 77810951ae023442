"""Expandable segments (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, Note
[Expandable segments]): growth by mapping pages without new segments,
contiguous addresses, memory_stats and memory_snapshot (is_expandable),
empty_cache unmapping free pages (and keeping live ones), one segment per
stream, the cross-stream rule with record_stream, ops over memory that spans
pages, turning the option off again, and out-of-memory, the memory fraction
and throw_on_npumalloc_oom (in subprocesses with a small device)."""

import pytest
import torch
import torch_npu

from conftest import run_py, run_py_ok

MiB = 1 << 20
LARGE_PAGE = 20 * MiB
SMALL_PAGE = 2 * MiB


@pytest.fixture
def expandable():
    """Expandable segments on, on an empty cache; off and emptied afterwards."""
    torch.npu.synchronize()
    torch.npu.empty_cache()
    torch.npu.memory._set_allocator_settings("expandable_segments:True")
    yield
    torch.npu.synchronize()
    torch.npu.memory._set_allocator_settings("expandable_segments:False")
    torch.npu.empty_cache()


def stat(key: str) -> int:
    return torch.npu.memory_stats()[key]


def expandable_segments(stream=None, kind="large"):
    """The mapped ranges of expandable segments of device 0 in the snapshot."""
    segs = [s for s in torch.npu.memory_snapshot()
            if s["is_expandable"] and s["device"] == 0 and s["segment_type"] == kind]
    if stream is not None:
        segs = [s for s in segs if s["stream"] == stream]
    return segs


def test_environment_variable_enables_them():
    out = run_py_ok(
        """
        import torch, torch_npu
        x = torch.empty(30 << 20, dtype=torch.uint8, device="npu")
        segs = torch.npu.memory_snapshot()
        print(len(segs), segs[0]["is_expandable"], segs[0]["total_size"] >> 20)
        print(torch.npu.memory_reserved() >> 20)
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"},
    )
    assert out.split() == ["1", "True", "40", "40"]  # two 20 MiB pages


def test_growth_maps_pages_at_the_end_of_one_segment(expandable):
    segments = stat("segment.all.current")
    reserved = torch.npu.memory_reserved()
    maps = stat("num_device_alloc")
    a = torch.empty(25 * MiB, dtype=torch.uint8, device="npu")
    b = torch.empty(25 * MiB, dtype=torch.uint8, device="npu")
    c = torch.empty(45 * MiB, dtype=torch.uint8, device="npu")
    # One segment, grown in place: the blocks are back to back.
    assert stat("segment.all.current") == segments + 1
    assert b.data_ptr() == a.data_ptr() + 25 * MiB
    assert c.data_ptr() == b.data_ptr() + 25 * MiB
    # 95 MiB need five 20 MiB pages, mapped in three steps.
    assert torch.npu.memory_reserved() - reserved == 5 * LARGE_PAGE
    assert stat("num_device_alloc") - maps == 3
    assert torch.npu.memory_allocated() >= 95 * MiB
    [seg] = expandable_segments()
    assert seg["total_size"] == 5 * LARGE_PAGE
    assert seg["segment_type"] == "large"
    assert [blk["state"] for blk in seg["blocks"]] == ["active_allocated"] * 3 + ["inactive"]
    assert sum(blk["size"] for blk in seg["blocks"]) == seg["total_size"]
    del a, b, c


def test_empty_cache_unmaps_free_pages_and_keeps_live_ones(expandable):
    reserved = torch.npu.memory_reserved()
    unmaps = stat("num_device_free")
    splits = stat("inactive_split.all.current")  # other tests' live tensors may leave some
    a = torch.empty(60 * MiB, dtype=torch.uint8, device="npu")
    b = torch.full((10 * MiB,), 7, dtype=torch.uint8, device="npu")  # in the fourth page
    assert torch.npu.memory_reserved() - reserved == 4 * LARGE_PAGE
    del a
    torch.npu.empty_cache()
    # The three pages under `a` went back; the one `b` lives in stayed.
    assert torch.npu.memory_reserved() - reserved == LARGE_PAGE
    assert stat("num_device_free") - unmaps == 1
    assert stat("inactive_split.all.current") == splits  # free pieces of expandable segments are not
    assert bool((b == 7).all())
    [seg] = expandable_segments()
    assert seg["address"] == b.data_ptr()  # the mapped range starts at b's page
    # Growing again fills the hole at the lowest address first.
    c = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")
    assert c.data_ptr() < b.data_ptr()
    del b, c
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == reserved
    assert expandable_segments() == []  # nothing mapped: the segment is released


def test_small_requests_use_two_mib_pages(expandable):
    # On a stream of its own: blocks of other streams are never reused for it,
    # whatever earlier tests left cached in ordinary small segments. Pool
    # streams are handed out round robin, and a test before may have left a
    # live tensor on one: take the first that holds no segment.
    for _ in range(64):
        s = torch.npu.Stream()
        if not any(g["stream"] == s.stream_id for g in torch.npu.memory_snapshot()):
            break
    else:
        pytest.fail("every pool stream holds memory that earlier tests left")
    reserved = torch.npu.memory_reserved()
    with torch.npu.stream(s):
        xs = [torch.empty(512 * 1024, dtype=torch.uint8, device="npu") for _ in range(6)]
    assert torch.npu.memory_reserved() - reserved == 2 * SMALL_PAGE
    [seg] = expandable_segments(stream=s.stream_id, kind="small")
    assert seg["total_size"] == 2 * SMALL_PAGE
    del xs
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == reserved


def test_every_stream_has_its_own_segment(expandable):
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        a = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    with torch.npu.stream(s2):
        b = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    assert len(expandable_segments(s1.stream_id)) == 1
    assert len(expandable_segments(s2.stream_id)) == 1
    del a, b


def test_record_stream_keeps_the_block_from_reuse_until_the_other_stream_ran(expandable, gate):
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        x = torch.ones(30 * MiB // 4, device="npu")
    g = gate(s2)
    x.record_stream(s2)
    old = x.data_ptr()
    del x
    with torch.npu.stream(s1):
        y = torch.empty(30 * MiB // 4, device="npu")
        assert y.data_ptr() != old  # s2 may still use the old block
    g.release()
    s2.synchronize()
    del y
    torch.npu.synchronize()
    torch.npu.empty_cache()
    assert expandable_segments(s1.stream_id) == []


def test_ops_over_memory_that_spans_pages(expandable):
    n = 30 * MiB // 4  # crosses the first 20 MiB page boundary
    x = torch.arange(n, dtype=torch.float32, device="npu")
    y = x * 2 + 1
    expected = torch.arange(n, dtype=torch.float32) * 2 + 1
    assert torch.equal(y.cpu(), expected)
    z = torch.empty_like(y)
    z.copy_(y)
    assert torch.equal(z.cpu(), expected)


def test_turning_them_off_gives_ordinary_segments_again(expandable):
    a = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    torch.npu.memory._set_allocator_settings("expandable_segments:False")
    b = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    by_address = {s["address"]: s for s in torch.npu.memory_snapshot()}
    assert by_address[b.data_ptr()]["is_expandable"] is False
    assert [s for s in expandable_segments() if s["blocks"][0]["address"] == a.data_ptr()]
    del a, b


def test_out_of_memory_releases_and_retries_then_raises():
    out = run_py_ok(
        """
        import torch, torch_npu
        a = torch.empty(100 << 20, dtype=torch.uint8, device="npu")
        try:
            torch.empty(60 << 20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            print("oom", "Tried to allocate 60.00 MiB" in str(e))
        print(torch.npu.memory_stats()["num_ooms"])
        del a  # cached, mapped: the next request reuses or remaps it
        b = torch.empty(120 << 20, dtype=torch.uint8, device="npu")
        print(torch.npu.memory_reserved() >> 20, len(torch.npu.memory_snapshot()))
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "NPU_SIM_MEMORY_MB": "128"},
    )
    assert out.split() == ["oom", "True", "1", "120", "1"]


def test_memory_fraction_and_throw_on_npumalloc_oom_apply_to_each_map():
    out = run_py_ok(
        """
        import torch, torch_npu
        a = torch.empty(60 << 20, dtype=torch.uint8, device="npu")  # three pages: 60 of 64 MiB
        try:
            torch.empty(20 << 20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError:
            print("fraction", torch.npu.memory_stats()["num_ooms"])
        print(torch.npu.memory_reserved() >> 20)
        torch.npu.memory._set_allocator_settings("throw_on_npumalloc_oom:True")
        try:
            torch.empty(20 << 20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            print("rejected", torch.npu.memory_stats()["num_oom_rejections"],
                  "Preemptively rejected a 20.00 MiB segment" in str(e))
        """,
        env={
            "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True,per_process_memory_fraction:0.5",
            "NPU_SIM_MEMORY_MB": "128",
        },
    )
    assert out.split() == ["fraction", "1", "60", "rejected", "1", "True"]


def test_empty_virt_addr_cache_keeps_physical_pages_for_the_next_growth(expandable):
    reserved = torch.npu.memory_reserved()
    free_before, _ = torch.npu.mem_get_info()
    maps = stat("num_device_alloc")
    a = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")
    del a
    torch_npu.npu.empty_virt_addr_cache()
    # Unmapped (not reserved any more) but the pages are kept: still taken.
    assert torch.npu.memory_reserved() == reserved
    assert torch.npu.mem_get_info()[0] == free_before - 3 * LARGE_PAGE
    b = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")  # maps the kept pages again
    assert torch.npu.mem_get_info()[0] == free_before - 3 * LARGE_PAGE
    assert stat("num_device_alloc") - maps == 2
    b.fill_(3)
    assert bool((b == 3).all())
    del b
    torch.npu.empty_cache()  # releases the kept pages too
    assert torch.npu.memory_reserved() == reserved
    assert torch.npu.mem_get_info()[0] == free_before


def test_empty_virt_addr_cache_needs_expandable_segments():
    torch.npu.memory._set_allocator_settings("expandable_segments:False")
    with pytest.raises(RuntimeError, match="please enable expandable_segments"):
        torch_npu.npu.empty_virt_addr_cache()


def test_page_size_options_set_the_large_pages():
    # torch_npu's segment_size_mb (deprecated) and c10's large_segment_size_mb
    # (which wins) choose the large pool's page; each stream's segment keeps
    # the page it was made with. Small pages stay 2 MiB.
    p = run_py(
        """
        import torch, torch_npu
        MiB = 1 << 20

        def grow(conf):
            torch.npu.memory._set_allocator_settings(conf)
            s = torch.npu.Stream()
            reserved = torch.npu.memory_reserved()
            with torch.npu.stream(s):
                x = torch.empty(8 * MiB, dtype=torch.uint8, device="npu")
                y = torch.empty(MiB // 2, dtype=torch.uint8, device="npu")
            print((torch.npu.memory_reserved() - reserved) // MiB)
            return x, y

        keep = [grow("expandable_segments:True,segment_size_mb:128")]
        keep.append(grow("large_segment_size_mb:64"))
        keep.append(grow("large_segment_size_mb:20,segment_size_mb:21"))
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": ""},
    )
    assert p.returncode == 0, p.stderr
    # 128 + 2, 64 + 2, 22 (21 MiB rounded up to the 2 MiB granularity) + 2
    assert p.stdout.split() == ["130", "66", "24"]
    # torch_npu's warnings (C++ warnings: on stderr)
    assert "`segment_size_mb` is deprecated, please use `large_segment_size_mb`" in p.stderr
    assert "Both `segment_size_mb` and `large_segment_size_mb` are set" in p.stderr


def test_kept_physical_pages_serve_only_pages_of_their_size():
    out = run_py_ok(
        """
        import torch, torch_npu
        MiB = 1 << 20
        torch.npu.memory._set_allocator_settings("expandable_segments:True")
        free0, _ = torch.npu.mem_get_info()
        s1, s2 = torch.npu.Stream(), torch.npu.Stream()
        with torch.npu.stream(s1):
            a = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")
        del a
        torch.npu.synchronize()
        torch_npu.npu.empty_virt_addr_cache()  # keeps three 20 MiB pages
        torch.npu.memory._set_allocator_settings("large_segment_size_mb:64")
        with torch.npu.stream(s2):
            b = torch.empty(50 * MiB, dtype=torch.uint8, device="npu").fill_(3)
            ok = bool((b == 3).all())  # its 50 MiB result takes a second page
        print(torch.npu.memory_reserved() // MiB, ok)
        print((free0 - torch.npu.mem_get_info()[0]) // MiB)
        del b
        torch.npu.synchronize()
        torch.npu.empty_cache()
        print(torch.npu.memory_reserved(), free0 - torch.npu.mem_get_info()[0])
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": ""},
    )
    # two 64 MiB pages and a small one; the kept 20 MiB pages are not mapped
    # into the new segment but still held; then everything released
    assert out.split() == ["130", "True", str(130 + 60), "0", "0"]


def test_large_segment_size_sets_the_segment_of_medium_requests():
    out = run_py_ok(
        """
        import torch, torch_npu
        MiB = 1 << 20
        torch.npu.memory._set_allocator_settings("large_segment_size_mb:64")
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            x = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
        print(sorted(seg["total_size"] // MiB for seg in torch.npu.memory_snapshot()
                     if seg["stream"] == s.stream_id))
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": ""},
    )
    # a 64 MiB segment for a 4 MiB request (torch_npu's and CUDA's rule)
    assert out.split() == ["[64]"]
