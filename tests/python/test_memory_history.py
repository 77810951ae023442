"""Memory history and snapshots (torch_npu.npu.memory._record_memory_history,
_snapshot, memory_snapshot, _dump_snapshot) in CUDA's format: the contents
are checked against what the program did, and PyTorch's _memory_viz renders
them."""

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torch_npu
from torch_npu.npu import memory


@pytest.fixture
def history():
    torch_npu.npu.synchronize()
    memory._record_memory_history(enabled="all", context="all", stacks="python",
                                  clear_history=True)
    yield
    memory._record_memory_history(enabled=None, clear_history=True)


def _allocate_here(n):  # a named frame the stacks must show
    return torch.empty(n, dtype=torch.uint8, device="npu")


def _trace(snapshot, device=0):
    return snapshot["device_traces"][device]


def _block_at(snapshot, address):
    for seg in snapshot["segments"]:
        for b in seg["blocks"]:
            if b["address"] == address:
                return seg, b
    return None, None


def test_snapshot_blocks_and_trace_are_true(history):
    t = _allocate_here(3000)
    addr = t.data_ptr()
    snap = memory._snapshot()
    seg, block = _block_at(snap, addr)
    assert block is not None
    assert block["state"] == "active_allocated"
    assert block["size"] == 3072 and block["requested_size"] == 3000  # rounded to 512 B
    assert any(f["name"] == "_allocate_here" for f in block["frames"]), block["frames"]
    assert seg["device"] == 0 and seg["segment_type"] == "small"
    assert seg["stream"] == torch_npu.npu.current_stream().stream_id
    assert seg["total_size"] == sum(b["size"] for b in seg["blocks"])
    assert seg["allocated_size"] >= 3072
    allocs = [e for e in _trace(snap) if e["action"] == "alloc" and e["addr"] == addr]
    assert len(allocs) == 1 and allocs[0]["size"] == 3072
    assert any(f["name"] == "_allocate_here" for f in allocs[0]["frames"])
    assert _trace(snap)[-1]["action"] == "snapshot"

    del t
    snap = memory._snapshot()
    _, block = _block_at(snap, addr)
    assert block is not None and block["state"] == "inactive" and block["frames"] == []
    actions = [e["action"] for e in _trace(snap) if e["addr"] == addr]
    assert actions[-2:] == ["free_requested", "free_completed"]


def test_segment_alloc_and_free_are_traced(history):
    t = torch.empty(30 * 2**20, dtype=torch.uint8, device="npu")  # its own large segment
    addr = t.data_ptr()
    del t
    memory.empty_cache()
    actions = [(e["action"], e["size"]) for e in _trace(memory._snapshot()) if e["addr"] == addr]
    assert ("segment_alloc", 30 * 2**20) in actions
    assert ("segment_free", 30 * 2**20) in actions
    assert actions.index(("segment_alloc", 30 * 2**20)) < actions.index(("segment_free", 30 * 2**20))


def test_free_waits_for_other_streams_in_the_trace(history, gate):
    side = torch_npu.npu.Stream()
    t = torch.ones(1024, device="npu")
    torch_npu.npu.synchronize()
    g = gate(side)  # side's work (as far as the allocator knows, on t) cannot finish
    t.record_stream(side)
    addr = t.data_ptr()
    del t
    snap = memory._snapshot()
    _, block = _block_at(snap, addr)
    assert block["state"] == "active_pending_free"
    actions = [e["action"] for e in _trace(snap) if e["addr"] == addr]
    assert actions[-1] == "free_requested"
    g.release()
    torch_npu.npu.synchronize()
    torch.empty(16, device="npu")  # an allocation processes the pending frees
    snap = memory._snapshot()
    actions = [e["action"] for e in _trace(snap) if e["addr"] == addr]
    assert actions[-2:] == ["free_requested", "free_completed"]
    assert _block_at(snap, addr)[1]["state"] == "inactive"


def test_oom_is_traced(history):
    free, total = memory.mem_get_info()
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total * 2, dtype=torch.uint8, device="npu")
    ooms = [e for e in _trace(memory._snapshot()) if e["action"] == "oom"]
    assert ooms and ooms[-1]["size"] == total * 2 and ooms[-1]["device_free"] <= total


def test_max_entries_keeps_the_newest():
    memory._record_memory_history(enabled="all", max_entries=4, clear_history=True)
    try:
        keep = [torch.empty(512 * (i + 1), dtype=torch.uint8, device="npu") for i in range(10)]
        trace = _trace(memory._snapshot())
        assert len(trace) == 4
        assert trace[-1]["action"] == "snapshot"
        assert [e["addr"] for e in trace[:3]] == [t.data_ptr() for t in keep[-3:]]
    finally:
        memory._record_memory_history(enabled=None, clear_history=True)


def test_state_only_keeps_stacks_but_no_trace():
    memory._record_memory_history(enabled="state", context="state", clear_history=True)
    try:
        t = _allocate_here(1000)
        snap = memory._snapshot()
        assert snap["device_traces"][0] == []
        _, block = _block_at(snap, t.data_ptr())
        assert any(f["name"] == "_allocate_here" for f in block["frames"])
    finally:
        memory._record_memory_history(enabled=None, clear_history=True)


def test_cpp_stacks(history):
    memory._record_memory_history(enabled="all", context="all", stacks="all")
    t = _allocate_here(100)
    _, block = _block_at(memory._snapshot(), t.data_ptr())
    names = [f["name"] for f in block["frames"]]
    assert "_allocate_here" in names
    assert any("c10_npu" in n or "NPUCachingAllocator" in n for n in names), names[:20]


def test_disabled_records_nothing():
    memory._record_memory_history(enabled=None, clear_history=True)
    t = _allocate_here(2048)
    snap = memory._snapshot()
    assert all(trace == [] for trace in snap["device_traces"])
    _, block = _block_at(snap, t.data_ptr())
    assert block["state"] == "active_allocated" and block["frames"] == []
    assert [s["address"] for s in memory.memory_snapshot()] == [s["address"] for s in snap["segments"]]


def test_memory_viz_renders_the_history(history, tmp_path):
    side = torch_npu.npu.Stream()
    keep = []
    for i in range(8):
        keep.append(_allocate_here(4096 * (i + 1)))
        if i % 3 == 0:
            keep.pop(0)
    with torch_npu.npu.stream(side):
        keep.append(torch.ones(2**20, device="npu"))
    path = tmp_path / "snap.pickle"
    memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}
    html = _memory_viz.trace_plot(snap)
    assert "snapshot.pickle" in html and len(html) > 1000
    assert "snapshot.pickle" in _memory_viz.segment_plot(snap)
    # The text views read every key a real snapshot has.
    summary = _memory_viz.segsum(snap)
    assert "segments:" in summary
    text = _memory_viz.trace(snap)
    assert "_allocate_here" in text or "alloc" in text
    assert _memory_viz.segments(snap, format_flamegraph=lambda lines: lines)
    for seg in snap["segments"]:
        assert seg["total_size"] == sum(b["size"] for b in seg["blocks"])


def test_snapshot_augmented_with_fx_traces(history, tmp_path):
    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.fc(x))

    with torch.fx.experimental._config.patch("enrich_profiler_metadata", True):
        traced = torch.fx.symbolic_trace(Mlp().to("npu"))
        traced.recompile()
        traced(torch.randn(4, 8, device="npu"))
    plain = memory._snapshot()
    augmented = memory._snapshot(augment_with_fx_traces=True)

    def fx_nodes(snapshot):
        return {f["fx_node_name"] for e in _trace(snapshot) for f in e["frames"] if "fx_node_name" in f}

    assert fx_nodes(plain) == set()
    assert {"fc", "relu"} <= fx_nodes(augmented)
    path = tmp_path / "s.pickle"
    memory._dump_snapshot(str(path), augment_with_fx_traces=True)
    with open(path, "rb") as f:
        assert {"fc", "relu"} <= fx_nodes(pickle.load(f))


def test_bad_arguments():
    with pytest.raises(ValueError, match="enabled must be"):
        memory._record_memory_history(enabled="sometimes")
    with pytest.raises(ValueError, match="context must be"):
        memory._record_memory_history(context="later")
    with pytest.raises(ValueError, match="stacks must be"):
        memory._record_memory_history(stacks="cpp")
    with pytest.raises(ValueError, match="max_entries must be positive"):
        memory._record_memory_history(max_entries=0)
    with pytest.raises(TypeError, match="max_entries must be an int"):
        memory._record_memory_history(max_entries="many")
    assert not torch_npu._C._npu_isHistoryEnabled()
