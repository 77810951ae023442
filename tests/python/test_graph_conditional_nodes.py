"""torch.cond inside NPU graph captures: conditional nodes
(torch_npu.npu._npugraph_conditional_nodes, NPUGraph.begin_capture_to_if_node /
end_capture_to_conditional_node; docs/GRAPHS.md "Data-dependent control flow").

A replay must run the branch the predicate tensor selects *at replay*, so every
test changes the predicate (or the inputs) between replays and compares with
eager results computed from the same values.
"""
import threading

import pytest
import torch
import torch_npu

from torch_npu.npu._npugraph_conditional_nodes import (
    ControlFlowOpWarmupDispatchMode,
    NPUGraphCaptureControlFlowOpDispatchMode,
)

npu = torch_npu.npu


def _capture(fn, *args):
    g = npu.NPUGraph()
    with npu.graph(g, stream=npu.Stream()), NPUGraphCaptureControlFlowOpDispatchMode():
        out = fn(*args)
    return g, out


def _replay(g):
    g.replay()
    npu.synchronize()


def _flag(value):
    return torch.tensor(value, device="npu")


def test_a_replay_runs_the_branch_the_predicate_holds_at_replay():
    x = torch.randn(5, device="npu")
    pred = _flag(True)
    g, out = _capture(lambda x, p: torch.cond(p, torch.sin, torch.cos, (x,)), x, pred)
    npu.synchronize()
    for value in (True, False, False, True):
        pred.fill_(value)
        x.copy_(torch.randn(5))
        _replay(g)
        expected = x.cpu().sin() if value else x.cpu().cos()
        torch.testing.assert_close(out.cpu(), expected)


def test_a_predicate_computed_inside_the_graph_is_read_where_it_is_computed():
    x = torch.zeros(4, device="npu")

    def fn(x):
        positive = x.sum() > 0  # computed by the graph at every replay
        return torch.cond(positive, lambda t: t * 10, lambda t: t - 10, (x,)) + 1

    g, out = _capture(fn, x)
    for fill, expected in ((1.0, 11.0), (-1.0, -10.0), (2.0, 21.0)):
        x.fill_(fill)
        _replay(g)
        assert out.cpu().tolist() == [expected] * 4


def test_multiple_outputs_and_nested_conds_match_eager():
    x = torch.randn(3, 4, device="npu")

    def inner(p, t):
        return torch.cond(p, lambda u: u + 1, lambda u: u - 1, (t,))

    def fn(x, p0, p1):
        def then(x, p1):
            return inner(p1, x.sin()), x * 2

        def otherwise(x, p1):
            return inner(p1, x.cos()), x * 3

        a, b = torch.cond(p0, then, otherwise, (x, p1))
        return a + b

    def eager(x, v0, v1):
        t = x.sin() if v0 else x.cos()
        return (t + 1 if v1 else t - 1) + x * (2 if v0 else 3)

    p0, p1 = _flag(True), _flag(True)
    g, out = _capture(fn, x, p0, p1)
    for v0 in (True, False):
        for v1 in (True, False):
            p0.fill_(v0)
            p1.fill_(v1)
            _replay(g)
            torch.testing.assert_close(out.cpu(), eager(x.cpu(), v0, v1))


def test_tensors_allocated_in_a_branch_are_the_graphs_outputs():
    x = torch.arange(6.0, device="npu")
    pred = _flag(False)

    def fn(x, p):
        def then(x):
            y = torch.empty_like(x)
            y.copy_(x + 1)
            return y

        def otherwise(x):
            return x.new_full(x.shape, -1.0)

        return torch.cond(p, then, otherwise, (x,))

    g, out = _capture(fn, x, pred)
    _replay(g)
    assert out.cpu().tolist() == [-1.0] * 6
    pred.fill_(True)
    _replay(g)
    assert out.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_random_ops_inside_a_branch_draw_new_numbers_at_every_replay():
    # CUDA and torch_npu refuse them; here each branch reserves its share of the
    # graph's generator offsets like any captured random op.
    x = torch.zeros(64, device="npu")
    pred = _flag(True)
    g, out = _capture(
        lambda x, p: torch.cond(p, lambda t: t + torch.randn_like(t), lambda t: t * 2, (x,)),
        x, pred)
    torch.manual_seed(7)
    _replay(g)
    first = out.cpu()
    _replay(g)
    second = out.cpu()
    assert first.std() > 0.5 and not torch.equal(first, second)
    torch.manual_seed(7)
    _replay(g)
    assert torch.equal(out.cpu(), first)  # the seed decides, as for eager ops
    pred.fill_(False)
    _replay(g)
    assert out.cpu().tolist() == [0.0] * 64


def test_the_capturing_graph_is_found_from_inside_a_body_and_bodies_nest():
    g = npu.NPUGraph()
    x = torch.zeros(2, device="npu")
    outer, inner = _flag(True), _flag(True)
    with npu.graph(g, stream=npu.Stream()):
        root = npu.current_stream()
        g.begin_capture_to_if_node(outer)
        assert npu.NPUGraph.get_currently_capturing_graph() is g
        body = npu.current_stream()
        # A stream of its own, never handed out by the pools that other code draws from.
        assert body != root
        assert body.stream_id not in {npu.Stream().stream_id for _ in range(70)}
        x.add_(1)
        npu.NPUGraph.get_currently_capturing_graph().begin_capture_to_if_node(inner)
        x.add_(10)
        g.end_capture_to_conditional_node()
        g.end_capture_to_conditional_node()
        assert npu.current_stream() == root
    for v_outer, v_inner, added in ((True, True, 11), (True, False, 1), (False, True, 0)):
        outer.fill_(v_outer)
        inner.fill_(v_inner)
        x.zero_()
        _replay(g)
        assert x.cpu().tolist() == [float(added)] * 2


def test_forward_captured_with_cond_then_backward_matches_eager():
    torch.manual_seed(0)
    linear_a = torch.nn.Linear(4, 4).npu()
    linear_b = torch.nn.Linear(4, 4).npu()

    def forward(x, p):
        return torch.cond(p, lambda t: linear_a(t).sin(), lambda t: linear_b(t).cos(), (x,))

    x0 = torch.randn(3, 4, device="npu")
    for value in (True, False):
        pred = _flag(value)
        x_eager = x0.clone().requires_grad_(True)
        forward(x_eager, pred).sum().backward()
        eager_grads = [x_eager.grad.cpu()] + [
            p.grad.cpu() if p.grad is not None else None
            for p in (*linear_a.parameters(), *linear_b.parameters())]
        for p in (*linear_a.parameters(), *linear_b.parameters()):
            p.grad = None
        x_graph = x0.clone().requires_grad_(True)
        g, out = _capture(forward, x_graph, pred)
        _replay(g)
        out.sum().backward()
        graph_grads = [x_graph.grad.cpu()] + [
            p.grad.cpu() if p.grad is not None else None
            for p in (*linear_a.parameters(), *linear_b.parameters())]
        for p in (*linear_a.parameters(), *linear_b.parameters()):
            p.grad = None
        for got, want in zip(graph_grads, eager_grads):
            if want is None:
                assert got is None or not got.any()
            else:
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_an_op_failing_inside_a_branch_fails_the_replay_and_names_the_op():
    x = torch.arange(4.0, device="npu")
    index = torch.tensor([0, 1], device="npu")
    pred = _flag(True)
    g, out = _capture(
        lambda x, i, p: torch.cond(p, lambda t, j: t.index_select(0, j), lambda t, j: t[:2] * 0,
                                   (x, i)),
        x, index, pred)
    _replay(g)
    assert out.cpu().tolist() == [0.0, 1.0]
    index.fill_(100)  # out of range: the kernel fails when the branch runs
    g.replay()
    with pytest.raises(RuntimeError, match=r"task 'if' failed.*aten::index_select: index out of range"):
        npu.synchronize()
    with pytest.raises(RuntimeError, match="NPUGraph::replay failed"):
        out.cpu()  # the failed replay's output is poisoned, not stale
    pred.fill_(False)  # the failing branch is not taken: the replay succeeds
    _replay(g)
    assert out.cpu().tolist() == [0.0, 0.0]


def test_a_host_sync_inside_a_branch_is_refused_and_the_graph_still_captures():
    x = torch.ones(3, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g, stream=npu.Stream()), NPUGraphCaptureControlFlowOpDispatchMode():
        with pytest.raises(RuntimeError, match="not permitted while the current NPU stream is "
                                               "capturing"):
            torch.cond(_flag(True), lambda t: t * t.sum().item(), lambda t: t, (x,))
        out = x * 4
    _replay(g)
    assert out.cpu().tolist() == [4.0] * 3
    assert npu.current_stream() == npu.default_stream()  # the body stream is current no more


def test_bad_predicates_are_refused_with_torch_npus_messages():
    x = torch.ones(2, device="npu")
    int_pred = torch.tensor(1, device="npu")
    g = npu.NPUGraph()
    with pytest.warns(UserWarning, match="empty"):
        with npu.graph(g), NPUGraphCaptureControlFlowOpDispatchMode():
            with pytest.raises(ValueError, match="Conditions must be on an npu device"):
                torch.cond(torch.tensor(True), torch.sin, torch.cos, (x,))
            with pytest.raises(RuntimeError, match="Conditions must be bool tensors"):
                torch.cond(int_pred, torch.sin, torch.cos, (x,))


def test_the_conditional_node_api_is_refused_outside_its_capture():
    g = npu.NPUGraph()
    pred = _flag(True)
    with pytest.raises(RuntimeError, match=r"capture_begin\(\) must be called before"):
        g.begin_capture_to_if_node(pred)
    with pytest.raises(RuntimeError, match="without begin_capture_to_if_node"):
        g.end_capture_to_conditional_node()
    other = npu.NPUGraph()
    with npu.graph(g, stream=npu.Stream()):
        with npu.stream(npu.Stream()):  # a stream that records into no capture
            with pytest.raises(RuntimeError, match="current NPUGraph capture stream"):
                g.begin_capture_to_if_node(pred)
        with pytest.raises(RuntimeError, match=r"capture_begin\(\) must be called before"):
            other.begin_capture_to_if_node(pred)
        with pytest.raises(RuntimeError, match="Conditions must be scalar tensors"):
            g.begin_capture_to_if_node(torch.ones(2, dtype=torch.bool, device="npu"))
        x = torch.ones(2, device="npu") * 2
    _replay(g)
    assert x.cpu().tolist() == [2.0, 2.0]


def test_resetting_a_graph_inside_a_branch_ends_every_capture():
    g = npu.NPUGraph()
    side = npu.Stream()
    pred = _flag(True)
    with npu.stream(side):
        g.capture_begin()
        try:
            g.begin_capture_to_if_node(pred)
            body = npu.current_stream()
            assert body != side and npu.is_current_stream_capturing()
        finally:
            g.reset()
        assert npu.current_stream() == side
        assert not npu.is_current_stream_capturing()
    with npu.stream(body):
        assert not npu.is_current_stream_capturing()
        y = torch.ones(2, device="npu") + 1  # the body stream runs eagerly again
        assert y.cpu().tolist() == [2.0, 2.0]  # read in the body stream's order


def test_warmup_mode_runs_torch_cond_eagerly_after_recording_both_branches():
    x = torch.randn(4, device="npu")
    with ControlFlowOpWarmupDispatchMode():
        out = torch.cond(_flag(False), torch.sin, torch.cos, (x,))
    torch.testing.assert_close(out.cpu(), x.cpu().cos())
    assert not npu.is_current_stream_capturing()


def test_the_debug_dump_draws_each_branch_as_a_cluster(tmp_path):
    x = torch.ones(2, device="npu")
    g, _ = _capture(lambda x, p: torch.cond(p, torch.sin, torch.cos, (x,)), x, _flag(True))
    path = tmp_path / "cond.dot"
    g.debug_dump(str(path))
    text = path.read_text()
    assert text.count("shape=diamond") == 2  # the then and the else node
    assert "aten::sin" in text and "aten::cos" in text and "subgraph cluster_" in text


def test_threads_capturing_graphs_with_bodies_at_once_each_record_their_own():
    # Each thread captures (thread-local mode) a graph whose body adds its own number; the
    # bodies' streams are private, so no thread's work lands in another's graph.
    results = {}
    errors = []
    start = threading.Barrier(2)

    def capture(k):
        try:
            x = torch.zeros(4, device="npu")
            pred = _flag(True)
            g = npu.NPUGraph()
            with npu.graph(g, stream=npu.Stream(), capture_error_mode="thread_local"):
                start.wait(timeout=30)
                for _ in range(20):
                    g.begin_capture_to_if_node(pred)
                    x.add_(k)
                    g.end_capture_to_conditional_node()
            _replay(g)
            results[k] = x.cpu().tolist()
            pred.fill_(False)
            _replay(g)
            results[-k] = x.cpu().tolist()
        except BaseException as error:  # noqa: B036 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=capture, args=(k,)) for k in (1, 100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert results == {1: [20.0] * 4, -1: [20.0] * 4, 100: [2000.0] * 4, -100: [2000.0] * 4}


def test_bad_arguments_to_the_conditional_node_api_raise():
    g = npu.NPUGraph()
    with npu.graph(g, stream=npu.Stream()):
        with pytest.raises((RuntimeError, TypeError)):
            g.begin_capture_to_if_node(None)
        with pytest.raises(TypeError):
            g.begin_capture_to_if_node("yes")
        with pytest.raises(RuntimeError, match="without begin_capture_to_if_node"):
            g.end_capture_to_conditional_node()
        y = torch.ones(1, device="npu") * 5
    _replay(g)
    assert y.cpu().tolist() == [5.0]
