"""Pinned host memory used by a captured copy (Note [Pinned blocks used by a
capture] in csrc/core/NPUHostAllocator.cpp): no event is recorded into the
capture, the block is not reused while the graph may replay the copy, and
after the graph is gone the host allocator keeps working (it used to raise
at every later pin_memory(), querying an event recorded in the capture)."""

import gc

import torch

import torch_npu


def captured_copy(value):
    stream = torch.npu.Stream()
    graph = torch.npu.NPUGraph()
    dst = torch.zeros(64, device="npu")
    with torch.npu.graph(graph, stream=stream):
        pinned = torch.full((64,), value).pin_memory()
        dst.copy_(pinned, non_blocking=True)
    return graph, dst, pinned


def test_replays_read_the_captured_pinned_block_and_it_is_not_reused():
    graph, dst, pinned = captured_copy(7.0)
    address = pinned.data_ptr()
    del pinned
    others = [torch.full((64,), 1.0).pin_memory() for _ in range(32)]
    assert all(o.data_ptr() != address for o in others)
    torch_npu.npu.host_empty_cache()
    for _ in range(3):
        dst.zero_()
        graph.replay()
        torch.npu.synchronize()
        assert torch.equal(dst.cpu(), torch.full((64,), 7.0))


def test_the_host_allocator_works_after_the_graph_is_destroyed():
    graph, dst, pinned = captured_copy(5.0)
    graph.replay()
    torch.npu.synchronize()
    del pinned
    graph.reset()
    del graph
    gc.collect()
    torch_npu.npu.host_empty_cache()
    fresh = torch.ones(4).pin_memory()
    assert fresh.is_pinned()
    out = torch.zeros(4, device="npu")
    out.copy_(fresh, non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(out.cpu(), torch.ones(4))


def test_default_capture_stream_is_per_device():
    # torch.npu.graph's default side stream used to be made once, on the
    # first device used: a later capture on another device recorded nothing.
    results = []
    for device in (1, 0):
        with torch.npu.device(device):
            x = torch.ones(8, device="npu")
            graph = torch.npu.NPUGraph()
            with torch.npu.graph(graph):
                y = x * 2
            x.fill_(3)
            graph.replay()
            torch.npu.synchronize()
            results.append(y.cpu())
    assert all(torch.equal(r, torch.full((8,), 6.0)) for r in results)
