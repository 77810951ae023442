"""NPU graphs at the PyTorch level (torch_npu.npu.NPUGraph, graph, pools, random
numbers, task groups, super-kernel scopes, torch.accelerator.Graph,
make_graphed_callables) and each of torch_npu's refusal texts.

Asynchrony is proved with gates (the ``gate`` fixture) and with read_f32, which
reads device memory without synchronizing; never with sleeps.
"""
import ctypes
import gc
import os
import re
import warnings

import pytest
import torch
import torch_npu

from conftest import load_npurt, read_f32, run_py_ok

npu = torch_npu.npu


def _captured_double(x, out, stream=None):
    g = npu.NPUGraph()
    with npu.graph(g, stream=stream):
        torch.mul(x, 2.0, out=out)
    return g


def test_capture_does_not_run_work_and_replay_does():
    x = torch.ones(4, device="npu")
    out = torch.zeros(4, device="npu")
    g = _captured_double(x, out)
    npu.synchronize()
    assert out.cpu().tolist() == [0.0] * 4  # capture recorded, ran nothing
    g.replay()
    npu.synchronize()
    assert out.cpu().tolist() == [2.0] * 4


def test_replays_see_current_input_contents():
    x = torch.ones(4, device="npu")
    out = torch.zeros(4, device="npu")
    g = _captured_double(x, out)
    for v in (3.0, 7.0, -1.0):
        x.fill_(v)
        g.replay()
        assert out.cpu().tolist() == [2 * v] * 4


def test_replay_is_queued_on_the_current_stream(gate):
    x = torch.ones(1024, device="npu")
    out = torch.zeros(1024, device="npu")
    g = _captured_double(x, out)
    s = npu.Stream()
    with npu.stream(s):
        gt = gate(s)
        g.replay()  # returns at once: the stream is blocked
        assert read_f32(out) == 0.0
        gt.release()
        s.synchronize()
    assert read_f32(out) == 2.0


def test_chain_of_ops_and_intermediates_from_the_pool():
    x = torch.arange(6, dtype=torch.float32, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        y = x * 2
        z = y + 1
        w = (z * z).sum()
    for shift in (0.0, 10.0):
        x.copy_(torch.arange(6, dtype=torch.float32) + shift)
        g.replay()
        ref = (((torch.arange(6, dtype=torch.float32) + shift) * 2 + 1) ** 2).sum()
        assert w.item() == pytest.approx(ref.item())


def test_tensors_freed_during_capture_stay_with_the_graph():
    x = torch.full((256,), 2.0, device="npu")
    out = torch.zeros(256, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        tmp = x + 1  # allocated and freed inside the capture
        torch.mul(tmp, 10.0, out=out)
        del tmp
    # Eager allocations must not get the memory the graph's intermediate uses.
    junk = [torch.full((256,), 999.0, device="npu") for _ in range(16)]
    g.replay()
    assert out.cpu().tolist() == [30.0] * 256
    del junk


@pytest.mark.parametrize("numel, pool", [(128, "small_pool"), ((1 << 18) + 128, "large_pool")])
def test_intermediates_freed_in_the_capture_are_reused_by_it(numel, pool):
    # CUDA's in-capture reuse (torch_npu's test_graph_memory_stats_and_use_
    # result_after_destroy_graph): a block freed on the capture stream after its
    # last use is taken again by the capture's later allocations, because every
    # replay runs the stream's nodes in capture order.
    gc.collect()
    npu.empty_cache()
    s = npu.Stream()
    s.wait_stream(npu.current_stream())
    with npu.stream(s):
        a = torch.ones(numel, device="npu")
        before = npu.memory_stats()
        g = npu.NPUGraph()
        g.capture_begin()
        b = a.clone()
        for _ in range(5):
            b = b.clone() + 1  # two blocks per step, both freed at the next
        g.capture_end()
    npu.current_stream().wait_stream(s)
    gc.collect()
    after = npu.memory_stats()
    delta = {k: after[f"{k}.{pool}.current"] - before[f"{k}.{pool}.current"]
             for k in ("segment", "active", "active_bytes")}
    # One segment and one live block (b): not one block per intermediate.
    assert delta == {"segment": 1, "active": 1, "active_bytes": numel * 4}, delta
    for _ in range(2):
        g.replay()
        assert b.sum().item() == 6 * numel
    del g
    gc.collect()
    npu.empty_cache()
    assert b.sum().item() == 6 * numel  # the result outlives its graph
    del a, b
    npu.synchronize()
    npu.empty_cache()


def test_intermediate_freed_while_a_forked_stream_reads_it_is_not_reused():
    # Cross-stream: the side stream's node holds what it reads, so a later
    # allocation of the capture stream cannot take it before the side read ran.
    x = torch.arange(4096, dtype=torch.float32, device="npu")
    side_out = torch.zeros(4096, device="npu")
    g = npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(g):
        main = npu.current_stream()
        tmp = x * 2
        side.wait_stream(main)
        with npu.stream(side):
            torch.add(tmp, 1, out=side_out)
        del tmp
        junk = [x * 100 for _ in range(4)]  # main stream allocations after the free
        main.wait_stream(side)
        del junk
    for _ in range(2):
        g.replay()
        npu.synchronize()
        assert side_out.cpu().tolist() == (torch.arange(4096.0) * 2 + 1).tolist()


def test_multi_stream_fork_join(tmp_path):
    x = torch.ones(64, device="npu")
    a = torch.zeros(64, device="npu")
    b = torch.zeros(64, device="npu")
    g = npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(g):
        main = npu.current_stream()
        side.wait_stream(main)  # fork
        torch.mul(x, 2.0, out=a)
        with npu.stream(side):
            torch.mul(x, 3.0, out=b)
        main.wait_stream(side)  # join
        a.add_(b)
    npu.synchronize()
    assert a.cpu().tolist() == [0.0] * 64
    g.replay()
    npu.synchronize()
    assert a.cpu().tolist() == [5.0] * 64
    path = tmp_path / "g.dot"
    g.debug_dump(str(path))
    text = path.read_text()
    assert text.startswith("digraph") and "aten::mul" in text and "->" in text


def test_unjoined_fork_fails_the_capture_cleanly():
    g = npu.NPUGraph()
    side = npu.Stream()
    x = torch.ones(4, device="npu")
    with pytest.raises(RuntimeError, match="Unjoined|unjoined"):
        with npu.graph(g):
            side.wait_stream(npu.current_stream())
            with npu.stream(side):
                x.add_(1)
    x.add_(1)
    assert x.cpu().tolist() == [2.0] * 4  # the streams work eagerly again


def test_no_pool_stream_is_the_default_capture_stream():
    # torch.cuda.graph captures on a pool stream, which a user's Stream() can
    # be; ours is private (Note [StreamId assignment]), so every fork forks.
    capture = npu.graph(npu.NPUGraph()).capture_stream
    assert capture == npu.graph.default_capture_stream
    pool = [npu.Stream(priority=p) for p in (0, -1) for _ in range(32)]
    assert len(set(pool)) == 64 and capture not in pool
    x = torch.ones(4, device="npu")
    for side in pool[:32]:
        with pytest.raises(RuntimeError, match="njoined"):
            with npu.graph(npu.NPUGraph()):
                side.wait_stream(npu.current_stream())
                with npu.stream(side):
                    x.add_(1)
    assert x.cpu().tolist() == [1.0] * 4  # nothing was captured, nothing ran


def test_an_exception_leaving_a_failed_capture_is_reported_once():
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="npuStreamSynchronize: stream .* is capturing") as info:
        with npu.graph(g):
            npu.current_stream().synchronize()  # raises, and invalidates the capture
    assert info.value.__context__ is None  # not chained under the failed capture_end
    with pytest.raises(ValueError, match="the user's error") as info:
        with pytest.warns(UserWarning, match="empty"):
            with npu.graph(npu.NPUGraph()):
                raise ValueError("the user's error")  # this capture itself is fine: it ends
    assert info.value.__context__ is None
    assert not npu.is_current_stream_capturing()
    assert npu.current_stream() == npu.default_stream()
    x = torch.ones(2, device="npu")
    with npu.graph(g):  # the failed capture left nothing behind
        x.mul_(3)
    g.replay()
    assert x.cpu().tolist() == [3.0, 3.0]


def test_shared_pools_between_graphs():
    x = torch.ones(128, device="npu")
    handle = npu.graph_pool_handle()
    g1, g2, g3 = npu.NPUGraph(), npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(g1, pool=handle):
        y = x * 2
    with npu.graph(g2, pool=handle):
        z = y + 1
    with npu.graph(g3, pool=g1.pool()):
        w = z * 10
    assert g1.pool() == g2.pool() == g3.pool() == handle
    for g in (g1, g2, g3):
        g.replay()
    assert w.cpu().tolist() == [30.0] * 128


def test_reset_returns_the_pool():
    x = torch.ones(1 << 20, device="npu")
    npu.synchronize()
    npu.empty_cache()
    before = npu.memory_reserved()
    g = npu.NPUGraph()
    with npu.graph(g):
        y = x * 2
    del y
    held = npu.memory_reserved()
    assert held >= before + (4 << 20)  # the pool keeps the freed intermediate
    npu.empty_cache()
    assert npu.memory_reserved() == held  # ... also across empty_cache
    g.reset()
    npu.empty_cache()
    assert npu.memory_reserved() == before
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()


def test_random_ops_draw_new_numbers_per_replay_and_stay_reproducible():
    g = npu.NPUGraph()
    npu.manual_seed(123)
    with npu.graph(g):
        r = torch.randn(16, device="npu")
    g.replay()
    first = r.cpu()
    g.replay()
    second = r.cpu()
    assert not torch.equal(first, second)
    npu.manual_seed(7)
    g.replay()
    a = r.cpu()
    after_a = torch.randn(4, device="npu").cpu()  # eager continues after the replay
    npu.manual_seed(7)
    g.replay()
    b = r.cpu()
    after_b = torch.randn(4, device="npu").cpu()
    assert torch.equal(a, b) and torch.equal(after_a, after_b)
    assert not torch.equal(a, first)


def test_random_replays_on_alternating_streams_follow_the_generator():
    g = npu.NPUGraph()
    with npu.graph(g):
        r = torch.rand(8, device="npu")
    s1, s2 = npu.Stream(), npu.Stream()
    npu.manual_seed(5)
    seen = []
    for s in (s1, s2, s1):
        with npu.stream(s):
            g.replay()
            seen.append(r.cpu())
    assert len({tuple(t.tolist()) for t in seen}) == 3
    npu.manual_seed(5)
    with npu.stream(s2):
        g.replay()
        assert torch.equal(r.cpu(), seen[0])


def test_is_current_stream_capturing():
    assert not npu.is_current_stream_capturing()
    g = npu.NPUGraph()
    with npu.graph(g):
        assert npu.is_current_stream_capturing()
        assert torch.npu.is_current_stream_capturing()
    assert not npu.is_current_stream_capturing()


NOT_CAPTURING = re.escape("The current NPU stream is not currently capturing.")
NO_NPUGRAPH = re.escape(
    "get_currently_capturing_graph() can be used only between capture_begin() and capture_end(). "
    "Did you use a stream without making it depend upon the original stream used for capture?")


def _begin_runtime_capture(handle):
    """Begins a relaxed capture on a raw stream through npurt, not through NPUGraph;
    returns the function that ends it."""
    rt = load_npurt()
    rt.npuStreamBeginCapture.argtypes = [ctypes.c_void_p, ctypes.c_int]
    rt.npuStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    rt.npuGraphDestroy.argtypes = [ctypes.c_void_p]
    assert rt.npuStreamBeginCapture(handle, 2) == 0

    def end():
        graph = ctypes.c_void_p(0)
        assert rt.npuStreamEndCapture(handle, ctypes.byref(graph)) == 0
        assert rt.npuGraphDestroy(graph) == 0

    return end


def test_get_currently_capturing_graph_finds_the_capturing_instance_from_forked_streams():
    x = torch.ones(4, device="npu")
    g, other = npu.NPUGraph(), npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(other):
        assert npu.NPUGraph.get_currently_capturing_graph() is other
    with npu.graph(g):
        assert npu.NPUGraph.get_currently_capturing_graph() is g
        assert torch.npu.NPUGraph.get_currently_capturing_graph() is g
        side.wait_stream(npu.current_stream())  # fork: side records into g's capture
        with npu.stream(side):
            assert npu.NPUGraph.get_currently_capturing_graph() is g
            x.add_(1)
        npu.current_stream().wait_stream(side)  # join
    assert x.cpu().tolist() == [1.0] * 4  # captured, not run
    g.replay()
    assert x.cpu().tolist() == [2.0] * 4


def test_get_currently_capturing_graph_outside_a_capture_raises():
    with pytest.raises(RuntimeError, match=NOT_CAPTURING):
        npu.NPUGraph.get_currently_capturing_graph()  # never captured on this stream
    g = npu.NPUGraph()
    unrelated = npu.Stream()
    with npu.graph(g):
        with npu.stream(unrelated):  # never joined the capture
            with pytest.raises(RuntimeError, match=NOT_CAPTURING):
                npu.NPUGraph.get_currently_capturing_graph()
    with npu.stream(npu.graph.default_capture_stream):
        with pytest.raises(RuntimeError, match=NOT_CAPTURING):  # the capture ended
            npu.NPUGraph.get_currently_capturing_graph()


def test_get_currently_capturing_graph_after_reset_mid_capture_raises():
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin()
        g.reset()  # ends the capture and drops it
        with pytest.raises(RuntimeError, match=NOT_CAPTURING):
            npu.NPUGraph.get_currently_capturing_graph()


def test_get_currently_capturing_graph_in_an_invalidated_capture_raises():
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="StreamCapture"):
        with npu.graph(g):
            npu.current_stream().synchronize()  # invalidates the capture
            with pytest.raises(RuntimeError, match=NOT_CAPTURING):
                npu.NPUGraph.get_currently_capturing_graph()


def test_get_currently_capturing_graph_of_a_capture_begun_in_the_runtime_raises():
    s = npu.Stream()
    with npu.stream(s):
        end = _begin_runtime_capture(s.npu_stream)  # npu_stream drains the queue first
        try:
            assert npu.is_current_stream_capturing()
            with pytest.raises(RuntimeError, match=NO_NPUGRAPH):
                npu.NPUGraph.get_currently_capturing_graph()
        finally:
            end()


# --------------------------------------------------------------------------
# torch_npu's refusals
# --------------------------------------------------------------------------


def test_capture_on_the_default_stream_is_refused():
    with pytest.raises(RuntimeError, match=re.escape(
            "NPU graphs must be captured on a non-default stream. (However, after capture, "
            "it's ok to replay them on the default stream.)")):
        npu.NPUGraph().capture_begin()


def test_replay_without_capture_is_refused():
    with pytest.raises(RuntimeError, match=re.escape(
            "Called NPUGraph::replay without a preceding successful capture.")):
        npu.NPUGraph().replay()


def test_capture_end_on_another_stream_is_refused():
    g = npu.NPUGraph()
    s1, s2 = npu.Stream(), npu.Stream()
    with npu.stream(s1):
        g.capture_begin()
    with npu.stream(s2):
        with pytest.raises(RuntimeError, match=re.escape("Capture must end on the same stream it began on.")):
            g.capture_end()
    with npu.stream(s1):
        g.capture_end()


def test_an_empty_capture_warns_as_cuda_does():
    g = npu.NPUGraph()
    with pytest.warns(UserWarning, match="The NPU Graph is empty"):
        with npu.graph(g):
            pass
    g.replay()  # an empty graph still replays
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _captured_double(torch.ones(2, device="npu"), torch.zeros(2, device="npu"))


def test_second_capture_on_one_instance_is_refused():
    g = npu.NPUGraph()
    with npu.graph(g):
        pass
    with pytest.raises(RuntimeError, match=re.escape(
            "This NPUGraph instance already owns a captured graph. "
            "To capture a new graph, create a new instance.")):
        with npu.graph(g):
            pass


def test_task_queue_enable_2_is_refused():
    out = run_py_ok(
        """
        import torch, torch_npu
        s = torch_npu.npu.Stream()
        try:
            with torch_npu.npu.graph(torch_npu.npu.NPUGraph(), stream=s):
                pass
        except RuntimeError as e:
            print("refused:", str(e).splitlines()[0])
        print((torch.ones(2, device="npu") + 1).sum().item())
        """,
        env={"TASK_QUEUE_ENABLE": "2"},
    )
    assert ("refused: Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please "
            "export TASK_QUEUE_ENABLE=1/0.") in out
    assert out.strip().endswith("4.0")


@pytest.mark.parametrize("read", ["item", "cpu", "nonzero"])
def test_host_read_inside_capture_raises_and_leaves_the_process_working(read):
    x = torch.ones(4, device="npu")
    g = npu.NPUGraph()
    reads = {"item": lambda: x.sum().item(), "cpu": lambda: x.cpu(), "nonzero": lambda: x.nonzero()}
    with npu.graph(g):
        with pytest.raises(RuntimeError, match="not permitted while the current NPU stream is capturing"):
            reads[read]()
    g.replay()
    assert x.sum().item() == 4.0


def test_synchronize_inside_capture_raises_and_invalidates_the_capture():
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="StreamCapture"):
        with npu.graph(g):
            torch.ones(4, device="npu").add_(1)
            npu.current_stream().synchronize()
    assert (torch.ones(2, device="npu") * 3).sum().item() == 6.0
    with npu.graph(g):  # the failed capture left nothing behind: capture again
        pass


@pytest.mark.parametrize("random", [False, True])
def test_replay_inside_another_capture_is_refused_once_and_leaves_both_graphs_working(random):
    x = torch.ones(4, device="npu")
    inner = npu.NPUGraph()
    with npu.graph(inner):
        y = x + (torch.rand(4, device="npu") if random else 1)
    outer = npu.NPUGraph()
    with npu.graph(outer):
        with pytest.raises(RuntimeError, match="cannot be replayed into another capture"):
            inner.replay()
        z = x * 3
    # Neither the outer capture nor the stream holds the refusal: the next
    # replays and synchronizes succeed and compute what they should.
    outer.replay()
    inner.replay()
    npu.synchronize()
    assert z.cpu().tolist() == [3.0] * 4
    if random:
        assert bool(((y.cpu() >= 1) & (y.cpu() < 2)).all())
    else:
        assert y.cpu().tolist() == [2.0] * 4


def test_failing_replay_poisons_its_outputs():
    x = torch.ones(8, device="npu")
    out = torch.zeros(8, device="npu")
    g = _captured_double(x, out)
    rt = load_npurt()
    rt.npuSetFaultInjection.argtypes = [ctypes.c_int, ctypes.c_uint64]
    npu.synchronize()
    try:
        assert rt.npuSetFaultInjection(1, 1) == 0  # the next work task fails: the graph's node
        g.replay()
        with pytest.raises(RuntimeError, match="injected fault"):
            npu.synchronize()
    finally:
        rt.npuSetFaultInjection(1, 0)
    with pytest.raises(RuntimeError, match="NPUGraph::replay failed"):
        out.cpu()
    g.replay()  # a good replay heals the output
    assert out.cpu().tolist() == [2.0] * 8


# --------------------------------------------------------------------------
# task groups and super-kernel scopes
# --------------------------------------------------------------------------


def test_task_group_update_replaces_the_arguments():
    x = torch.full((8,), 2.0, device="npu")
    y = torch.zeros(8, device="npu")
    g = npu.NPUGraph()
    event = npu.ExternalEvent()
    with npu.graph(g):
        stream = npu.current_stream()
        event.wait(stream)
        event.reset(stream)
        npu.graph_task_group_begin(stream)
        torch.mul(x, 3.0, out=y)
        handle = npu.graph_task_group_end(stream)
    g.replay()
    assert y.cpu().tolist() == [6.0] * 8
    update_stream = npu.Stream()
    with npu.stream(update_stream):
        npu.graph_task_update_begin(update_stream, handle)
        torch.mul(x, 5.0, out=y)  # collected, not run
        npu.graph_task_update_end(update_stream)
        event.record(update_stream)
    npu.synchronize()
    assert y.cpu().tolist() == [6.0] * 8
    g.replay()
    assert y.cpu().tolist() == [10.0] * 8
    x.fill_(1.0)
    g.replay()
    assert y.cpu().tolist() == [5.0] * 8


def test_mismatched_task_group_update_is_a_clear_error():
    x = torch.ones(8, device="npu")
    y = torch.zeros(8, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        stream = npu.current_stream()
        npu.graph_task_group_begin(stream)
        torch.mul(x, 3.0, out=y)
        handle = npu.graph_task_group_end(stream)
    s = npu.Stream()
    with npu.stream(s):
        npu.graph_task_update_begin(s, handle)
        torch.mul(x, 5.0, out=y)
        torch.add(x, 5.0, out=y)
        with pytest.raises(RuntimeError, match="do not match the task group"):
            npu.graph_task_update_end(s)
    g.replay()
    assert y.cpu().tolist() == [3.0] * 8  # the graph kept its tasks
    with pytest.raises(TypeError, match="graph_task_group_end"):
        npu.graph_task_update_begin(s, None)


def test_super_kernel_scope_fuses_nodes(tmp_path):
    x = torch.ones(16, device="npu")
    out1, out2 = torch.zeros(16, device="npu"), torch.zeros(16, device="npu")

    def body():
        y = x * 2
        y.add_(1)
        torch.mul(y, 3.0, out=out1)

    plain, fused = npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(plain):
        body()
    with npu.graph(fused):
        npu.super_kernel_scope_begin("sk")
        body()
        torch.add(out1, 1.0, out=out2)
        npu.super_kernel_scope_end("sk")
    fused.replay()
    assert out2.cpu().tolist() == [10.0] * 16
    plain_dot, fused_dot = tmp_path / "p.dot", tmp_path / "f.dot"
    plain.debug_dump(str(plain_dot))
    fused.debug_dump(str(fused_dot))
    assert "sk" in fused_dot.read_text()
    count = lambda p: len(re.findall(r"^\s*n\d+\s*\[", p.read_text(), re.M))  # noqa: E731
    assert count(fused_dot) == 1 < count(plain_dot)


@pytest.mark.parametrize("name", ["", "   "])
def test_super_kernel_scope_name_check(name):
    for fn in (npu.super_kernel_scope_begin, npu.super_kernel_scope_end):
        with pytest.raises(RuntimeError, match=re.escape("scope_name should be None or a non-empty string.")):
            fn(name)


def test_debug_dump_without_capture_warns(tmp_path):
    with pytest.warns(UserWarning, match="without a preceding successful capture"):
        npu.NPUGraph().debug_dump(str(tmp_path / "x.dot"))


# --------------------------------------------------------------------------
# torch.accelerator.Graph and make_graphed_callables
# --------------------------------------------------------------------------


def test_torch_accelerator_graph_and_its_refusal_of_get_currently_capturing_graph():
    x = torch.ones(4, device="npu")
    out = torch.zeros(4, device="npu")
    s = torch.Stream(device="npu")
    g = torch.accelerator.Graph()
    with s, g:
        with pytest.raises(RuntimeError, match=re.escape(
                "torch.npu.NPUGraph.get_currently_capturing_graph() is not supported during "
                "torch.accelerator.Graph capture.")):
            npu.NPUGraph.get_currently_capturing_graph()
        torch.mul(x, 4.0, out=out)  # the refusal left the capture going
    npu.synchronize()
    assert out.cpu().tolist() == [0.0] * 4
    g.replay()
    assert out.cpu().tolist() == [4.0] * 4


def test_make_graphed_callables_forward_and_backward():
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 3).to("npu")
    reference = torch.nn.Linear(4, 3).to("npu")
    reference.load_state_dict(module.state_dict())
    sample = torch.randn(2, 4, device="npu", requires_grad=True)
    graphed = npu.make_graphed_callables(module, (sample,))
    for _ in range(2):
        inp = torch.randn(2, 4, device="npu", requires_grad=True)
        inp_ref = inp.detach().clone().requires_grad_(True)
        out = graphed(inp)
        out.sum().backward()
        ref = reference(inp_ref)
        ref.sum().backward()
        assert torch.allclose(out.cpu(), ref.cpu())
        assert torch.allclose(inp.grad.cpu(), inp_ref.grad.cpu())


# --------------------------------------------------------------------------
# external streams: compat refuses, full allows
# --------------------------------------------------------------------------


@pytest.fixture
def ext():
    from test_external_stream import raw_stream

    with raw_stream() as ptr:
        yield npu.ExternalStream(ptr)


MANAGED = re.escape("This path requires a torch_npu-managed stream.")


def test_compat_mode_refuses_every_graph_api_on_an_external_stream(ext):
    g = npu.NPUGraph()
    per_stream = {
        "graph_task_group_begin": lambda: npu.graph_task_group_begin(ext),
        "graph_task_group_end": lambda: npu.graph_task_group_end(ext),
        "graph_task_update_begin": lambda: npu.graph_task_update_begin(ext, None),
        "graph_task_update_end": lambda: npu.graph_task_update_end(ext),
        "launch_callback": lambda: npu._launch_host_func(ext, print, None),
        "subscribe_report": lambda: npu._subscribe_report(ext),
        "unsubscribe_report": lambda: npu._unsubscribe_report(ext),
    }
    for api, fn in per_stream.items():
        with pytest.raises(RuntimeError, match=f"External NPU stream is not supported in {api}. " + MANAGED):
            fn()
    with pytest.raises(RuntimeError, match="External NPU stream is not supported in launch_callback"):
        npu._launch_host_func_pending(ext, print, None)
    with npu.stream(ext):
        for api, fn in {"NPUGraph::capture_begin": g.capture_begin,
                        "NPUGraph::capture_end": g.capture_end,
                        "super_kernel_scope_begin": npu.super_kernel_scope_begin,
                        "super_kernel_scope_end": npu.super_kernel_scope_end}.items():
            with pytest.raises(RuntimeError, match=f"External NPU stream is not supported in {api}. " + MANAGED):
                fn()
        with pytest.raises(RuntimeError, match="External NPU stream is not supported in NPUGraph::capture_begin"):
            with npu.graph(npu.NPUGraph(), stream=ext):
                pass
    assert npu.current_stream() == npu.default_stream()  # the context manager left cleanly
    captured = _captured_double(torch.ones(2, device="npu"), torch.zeros(2, device="npu"))
    with npu.stream(ext):
        with pytest.raises(RuntimeError, match="External NPU stream is not supported in NPUGraph::replay"):
            captured.replay()


def test_get_currently_capturing_graph_on_an_external_stream(ext):
    # compat: an external current stream is "not capturing" without asking the runtime, as
    # torch_npu; full: the runtime is asked, as for any stream.
    end = _begin_runtime_capture(ext.npu_stream)
    try:
        with npu.stream(ext):
            with pytest.raises(RuntimeError, match=NOT_CAPTURING):
                npu.NPUGraph.get_currently_capturing_graph()
            npu.set_external_stream_mode("full")
            try:
                with pytest.raises(RuntimeError, match=NO_NPUGRAPH):
                    npu.NPUGraph.get_currently_capturing_graph()
            finally:
                npu.set_external_stream_mode("compat")
    finally:
        end()
    npu.set_external_stream_mode("full")
    try:
        g = npu.NPUGraph()
        with npu.graph(g, stream=ext):
            assert npu.NPUGraph.get_currently_capturing_graph() is g
        h = npu.NPUGraph()
        with npu.graph(h):  # a managed capture stream, forked into ext and joined back
            ext.wait_stream(npu.current_stream())
            with npu.stream(ext):
                assert npu.NPUGraph.get_currently_capturing_graph() is h
            npu.current_stream().wait_stream(ext)
        with npu.stream(ext):
            with pytest.raises(RuntimeError, match=NOT_CAPTURING):
                npu.NPUGraph.get_currently_capturing_graph()
    finally:
        npu.set_external_stream_mode("compat")


def test_full_mode_allows_capture_callbacks_groups_and_scopes_on_an_external_stream(ext, tmp_path):
    npu.set_external_stream_mode("full")
    try:
        x = torch.full((8,), 2.0, device="npu")
        y = torch.zeros(8, device="npu")
        calls = []
        g = npu.NPUGraph()
        with npu.graph(g, stream=ext):
            npu.graph_task_group_begin(ext)
            torch.mul(x, 3.0, out=y)
            handle = npu.graph_task_group_end(ext)
            npu.super_kernel_scope_begin("scope")
            y.add_(1)
            y.add_(1)
            npu.super_kernel_scope_end("scope")
            npu._launch_host_func(ext, calls.append, "cb")
        with npu.stream(ext):
            g.replay()
            ext.synchronize()
        assert y.cpu().tolist() == [8.0] * 8 and calls == ["cb"]
        s = npu.Stream()
        with npu.stream(s):
            npu.graph_task_update_begin(s, handle)
            torch.mul(x, 5.0, out=y)
            npu.graph_task_update_end(s)
        g.replay()
        npu.synchronize()
        assert y.cpu().tolist() == [12.0] * 8 and calls == ["cb", "cb"]
        npu._subscribe_report(ext)
        npu._unsubscribe_report(ext)
    finally:
        npu.set_external_stream_mode("compat")
