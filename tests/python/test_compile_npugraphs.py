"""Compiled functions replayed as NPU graphs: ``torch.compile(backend="npugraphs")``
and the runner under it (Note [Compiled functions replayed as NPU graphs] in
torch_npu/npu/_graph_runner.py). ``mode="reduce-overhead"`` (Inductor) is in
test_compile_inductor.py, behind `make test-compile`.

Stream order is checked with gates (a blocked stream), never with timing.
"""
import copy
import gc
import inspect
import warnings

import pytest
import torch
import torch_npu

from conftest import read_f32

import torch._dynamo  # noqa: E402  (after torch_npu: its import hook sets Dynamo up)
from torch._dynamo.utils import counters  # noqa: E402
from torch_npu.npu import _graph_runner  # noqa: E402
from torch_npu.npu._graph_runner import NPUGraphRunner  # noqa: E402

npu = torch_npu.npu


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()


def _count(what: str) -> int:
    return counters["npugraphs"][what]


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def _runner_warnings(call) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if "npugraphs:" in str(w.message)]


# --- the backend --------------------------------------------------------------


def test_backend_and_step_marker_are_registered():
    assert "npugraphs" in torch._dynamo.list_backends()
    marker = torch.compiler.npugraph_mark_step_begin
    assert marker.__name__ == "npugraph_mark_step_begin"
    assert str(inspect.signature(marker)) == "() -> None"
    before = _graph_runner._step
    torch.compiler.npugraph_mark_step_begin()
    assert _graph_runner._step == before + 1


def test_the_step_marker_works_before_dynamo_is_imported(run_py):
    out = run_py(
        """
        import sys, torch, torch_npu
        torch.compiler.npugraph_mark_step_begin()
        print("torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
        print("npugraphs" in torch.compiler.list_backends())
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True"]


def test_training_matches_cpu_and_replays_forward_and_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    reference = copy.deepcopy(model)
    model.npu()
    compiled = torch.compile(model, backend="npugraphs")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(4):
        x = torch.randn(4, 8)
        loss = compiled(x.npu()).square().sum()
        loss.backward()
        ref_loss = reference(x).square().sum()
        ref_loss.backward()
        for p, r in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad.cpu(), r.grad)
        torch.testing.assert_close(loss.cpu(), ref_loss)
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    # forward and backward: a warm-up each, then one recording each, replayed
    assert _count("warmup") == 2
    assert _count("record") == 2
    assert _count("replay") == 6
    assert _count("eager") == 0


def test_a_replay_is_queued_on_the_current_stream(gate):
    f = torch.compile(lambda x: x * 2, backend="npugraphs")
    f(torch.ones(4, device="npu"))  # warm-up
    f(torch.ones(4, device="npu"))  # recorded; its output is dropped
    x = torch.full((4,), 5.0, device="npu")
    npu.synchronize()
    g = gate(npu.current_stream())
    y = f(x)  # the host does not wait for the gated stream
    assert read_f32(y) == 2.0  # the recording's memory still holds the last replay's result
    g.release()
    npu.synchronize()
    assert read_f32(y) == 10.0
    assert _count("replay") == 2


def test_outputs_that_are_alive_are_never_overwritten():
    f = torch.compile(lambda x: x + 1, backend="npugraphs")
    outputs = [f(torch.full((3,), float(i), device="npu")) for i in range(5)]
    for i, out in enumerate(outputs):
        _same(out, torch.full((3,), i + 1.0))
    # each call after the warm-up found every recording's outputs alive
    assert _count("record") == 4
    del outputs
    gc.collect()
    f(torch.zeros(3, device="npu"))
    assert _count("record") == 4  # a dead recording is replayed


def test_past_the_rerecord_limit_calls_run_without_a_graph():
    f = torch.compile(lambda x: x * 3, backend="npugraphs")
    with torch._inductor.config.patch({"triton.cudagraph_unexpected_rerecord_limit": 2}):
        kept = []
        messages = _runner_warnings(
            lambda: kept.extend(f(torch.full((2,), float(i), device="npu")) for i in range(5)))
    for i, out in enumerate(kept):
        _same(out, torch.full((2,), 3.0 * i))
    assert _count("record") == 2
    assert _count("eager") == 2
    assert len(messages) == 1, messages
    assert "cudagraph_unexpected_rerecord_limit" in messages[0]
    assert "npugraph_mark_step_begin" in messages[0]


def test_mark_step_begin_lets_the_next_replay_reuse_earlier_outputs():
    runner = NPUGraphRunner(lambda args: [args[0] + 1], name="plus one")
    runner([torch.zeros(2, device="npu")])  # warm-up
    kept = runner([torch.full((2,), 1.0, device="npu")])[0]
    assert _count("record") == 1
    torch.compiler.npugraph_mark_step_begin()
    newer = runner([torch.full((2,), 7.0, device="npu")])[0]
    assert _count("record") == 1  # the same recording, replayed
    _same(newer, torch.full((2,), 8.0))
    _same(kept, torch.full((2,), 8.0))  # declared dead, so its memory was reused


def test_input_mutations_reach_the_callers_tensors():
    def scale_in_place(x, y):
        x.mul_(2)
        return x + y

    f = torch.compile(scale_in_place, backend="npugraphs")
    for i in range(4):
        x = torch.full((3,), float(i + 1), device="npu")
        y = torch.ones(3, device="npu")
        out = f(x, y)
        _same(x, torch.full((3,), 2.0 * (i + 1)))
        _same(out, torch.full((3,), 2.0 * (i + 1) + 1))
    assert _count("replay") >= 2


def test_the_runner_copies_back_the_arguments_the_graph_writes_to():
    # AOTAutograd keeps input mutations in the graph under Inductor
    # (keep_inference_input_mutations); the runner then writes them back.
    def scale_in_place(args):
        args[0].mul_(2)
        return [args[0] + 1]

    runner = NPUGraphRunner(scale_in_place, mutated_input_idxs=(0,), name="scale")
    for i in range(4):
        x = torch.full((3,), float(i + 1), device="npu")
        (out,) = runner([x])
        _same(x, torch.full((3,), 2.0 * (i + 1)))
        _same(out, torch.full((3,), 2.0 * (i + 1) + 1))
    assert _count("replay") == 3


def test_the_runner_rebuilds_views_of_arguments_over_the_callers_tensor():
    runner = NPUGraphRunner(lambda args: [args[0][1:], args[0].sum()], name="tail")
    for _ in range(3):
        x = torch.arange(4.0, device="npu")
        view, total = runner([x])
        assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        view.fill_(0)
        _same(x, torch.tensor([0.0, 0.0, 0.0, 0.0]))
        _same(total, torch.tensor(6.0))
    assert _count("replay") == 2


def test_an_output_that_views_an_input_aliases_the_callers_tensor():
    f = torch.compile(lambda x: (x[1:], x.sum()), backend="npugraphs")
    for _ in range(3):
        x = torch.arange(4.0, device="npu")
        view, total = f(x)
        assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        view.fill_(0)
        _same(x, torch.tensor([0.0, 0.0, 0.0, 0.0]))
        _same(total, torch.tensor(6.0))


@pytest.mark.parametrize("layout", ["transposed", "expanded", "offset"])
def test_arguments_of_any_layout_are_copied_into_the_recording(layout):
    def make(i: float) -> torch.Tensor:
        base = torch.arange(12.0, device="npu") + i
        if layout == "transposed":
            return base.view(3, 4).t()
        if layout == "expanded":
            return base[:4].view(4, 1).expand(4, 3)
        return base[5:9]

    f = torch.compile(lambda x: x * 2 + 1, backend="npugraphs")
    for i in range(4):
        x = make(float(i))
        _same(f(x), x * 2 + 1)
    assert _count("replay") == 3


def test_random_ops_draw_new_numbers_at_every_replay():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5), backend="npugraphs")
    x = torch.ones(4096, device="npu")
    masks = [(f(x) == 0).cpu() for _ in range(4)]
    assert _count("replay") == 3
    assert all(0.4 < m.float().mean().item() < 0.6 for m in masks)
    assert len({tuple(m.tolist()) for m in masks}) == 4


def test_a_function_without_tensor_arguments_is_recorded_on_the_current_device():
    f = torch.compile(lambda: torch.arange(3.0, device="npu") * 2, backend="npugraphs")
    results = [f() for _ in range(3)]
    for out in results:
        _same(out, torch.tensor([0.0, 2.0, 4.0]))
    assert _count("record") == 2 and _count("eager") == 0  # results[1] is alive at the third call


def test_a_new_parameter_address_is_a_new_recording():
    model = torch.nn.Linear(3, 3, bias=False).npu()
    f = torch.compile(model, backend="npugraphs")
    x = torch.ones(1, 3, device="npu")
    with torch.no_grad():
        f(x)
        f(x)
        model.weight.fill_(1.0)  # in place: the recording reads the parameter's memory
        _same(f(x), torch.full((1, 3), 3.0))
        model.weight.data = torch.full((3, 3), 2.0, device="npu")  # new memory
        _same(f(x), torch.full((1, 3), 6.0))


def test_only_a_warm_up_that_returned_counts():
    refuse = [True]

    def fn(args):
        if refuse[0]:
            raise ValueError("not yet")
        return [args[0] + 1]

    runner = NPUGraphRunner(fn, name="picky")
    x = torch.zeros(2, device="npu")
    with pytest.raises(ValueError, match="not yet"):
        runner([x])
    refuse[0] = False
    _same(runner([x])[0], torch.ones(2))  # the warm-up, not a capture
    assert (_count("warmup"), _count("record")) == (1, 0)
    _same(runner([x])[0], torch.ones(2))
    assert (_count("record"), _count("eager")) == (1, 0)


def test_a_host_read_makes_the_capture_fail_and_the_function_run_without_a_graph():
    runner = NPUGraphRunner(lambda args: [args[0] * args[0].sum().item()], name="scaled")
    results = []
    messages = _runner_warnings(
        lambda: results.extend(runner([torch.full((2,), 2.0, device="npu")])[0] for _ in range(3)))
    for out in results:
        _same(out, torch.full((2,), 8.0))
    assert len(messages) == 1, messages
    assert "scaled runs without an NPU graph because its capture failed" in messages[0]
    assert "_local_scalar_dense" in messages[0]
    assert _count("eager") == 2
    npu.synchronize()  # the failed capture left the streams usable


def test_work_on_the_cpu_inside_the_graph_is_not_captured():
    f = torch.compile(lambda x: (x.cpu() + 1).to("npu") * 2, backend="npugraphs")
    results = []
    messages = _runner_warnings(
        lambda: results.extend(f(torch.full((2,), float(i), device="npu")) for i in range(3)))
    for i, out in enumerate(results):
        _same(out, torch.full((2,), 2.0 * (i + 1)))
    assert any("computes on cpu" in m for m in messages), messages
    assert _count("record") == 0


def test_a_cpu_argument_runs_without_a_graph():
    runner = NPUGraphRunner(lambda args: [args[0] * 2], name="doubler")
    results = []
    messages = _runner_warnings(lambda: results.extend(
        runner([torch.ones(2)])[0] for _ in range(3)))
    assert all(torch.equal(r, torch.full((2,), 2.0)) for r in results)
    assert messages == ["npugraphs: doubler runs without an NPU graph because argument 0 is a cpu "
                        "tensor (only npu tensors can be graph inputs)."]


def test_a_sparse_argument_runs_without_a_graph():
    runner = NPUGraphRunner(lambda args: [args[0].to_dense() * 2], name="densify")
    sparse = torch.eye(3, device="npu").to_sparse()
    results = []
    messages = _runner_warnings(lambda: results.extend(runner([sparse])[0] for _ in range(2)))
    for out in results:
        _same(out, torch.eye(3) * 2)
    assert len(messages) == 1 and "argument 0 is not a plain strided tensor" in messages[0], messages


def test_a_replay_on_another_stream_waits_for_the_previous_replay(gate):
    f = torch.compile(lambda x: x * 2, backend="npugraphs")
    f(torch.ones(4, device="npu"))
    f(torch.ones(4, device="npu"))  # recorded
    first, second = npu.Stream(), npu.Stream()
    x1 = torch.full((4,), 1.0, device="npu")
    x2 = torch.full((4,), 2.0, device="npu")
    npu.synchronize()
    g = gate(first)
    with npu.stream(first):
        del_me = f(x1)
    del del_me  # dead: the recording may be replayed again, after this replay
    with npu.stream(second):
        y = f(x2)
    assert _count("record") == 1
    assert not second.query()  # it waits for the gated replay on `first`
    g.release()
    npu.synchronize()
    _same(y, torch.full((4,), 4.0))


def test_dynamo_reset_keeps_outputs_that_are_alive_valid():
    f = torch.compile(lambda x: x * 5, backend="npugraphs")
    f(torch.ones(8, device="npu"))
    alive = f(torch.ones(8, device="npu"))
    torch._dynamo.reset()
    del f
    gc.collect()  # the runner, its recording, graph and pool are gone
    scribble = [torch.full((8,), 9.0, device="npu") for _ in range(64)]
    _same(alive, torch.full((8,), 5.0))  # its memory was not reused
    del scribble


def test_reading_an_output_of_a_failed_replay_raises_its_error():
    f = torch.compile(lambda t, i: t.index_select(0, i) * 2, backend="npugraphs")
    t = torch.arange(5.0, device="npu")
    for k in range(2):  # warm-up, record
        _same(f(t, torch.tensor([k, 1], device="npu")), torch.tensor([2.0 * k, 2.0]))
    bad = f(t, torch.tensor([7, 1], device="npu"))  # replayed; the node fails on the device
    with pytest.raises(RuntimeError, match="index out of range"):
        npu.synchronize()  # reported once, to the stream
    with pytest.raises(RuntimeError, match="holds no valid data.*index out of range"):
        bad.cpu()  # not the previous replay's values
    del bad
    good = f(t, torch.tensor([3, 4], device="npu"))  # the next replay heals the memory
    _same(good, torch.tensor([6.0, 8.0]))
    assert _count("record") == 1
