"""torch.compile's default backend (Inductor) on npu: torch_npu._inductor
(Note [Compiled npu graphs run as stream tasks]). Each compile builds C++ and
takes 10-50 s on 2 cores, so the file runs under `make test-compile`
(NPU_TEST_INDUCTOR=1), not in `make test`.

Stream order is checked with gates: a compiled graph that ran on the host at
the call, or on the wrong stream, gives a wrong value.
"""
import os

import pytest
import torch
import torch_npu

from conftest import read_f32

pytestmark = pytest.mark.skipif(
    os.environ.get("NPU_TEST_INDUCTOR") != "1",
    reason="Inductor compiles C++ (tens of seconds per graph): run with `make test-compile`",
)

npu = torch_npu.npu


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _double_plus_one(a):
    return a * 2 + torch.ones(a.shape, device="npu")


def test_import_registers_the_device_op_overrides():
    import torch_npu._inductor  # noqa: F401
    from torch._inductor.codegen.common import get_device_op_overrides

    ops = get_device_op_overrides("npu")
    assert ops.synchronize() == "torch.npu.synchronize()"
    assert "_npu_getCurrentRawStream" in ops.import_get_raw_stream_as("get_raw_stream")


def test_compiled_model_matches_eager_forward_and_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).npu()
    x = torch.randn(6, 8, device="npu")
    expected = model(x)
    expected.square().sum().backward()
    grads = [p.grad.cpu() for p in model.parameters()]
    model.zero_grad()
    out = torch.compile(model)(x)  # the default backend: inductor
    torch.testing.assert_close(out.cpu(), expected.cpu())
    out.square().sum().backward()
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad.cpu(), g)


def test_compiled_graph_is_a_task_of_the_current_stream(gate):
    compiled = torch.compile(_double_plus_one)
    x = torch.zeros(512, device="npu")
    compiled(x)  # compile outside the gate
    npu.synchronize()
    with gate(npu.current_stream()):
        x.add_(1)  # queued behind the gate
        y = compiled(x)  # returns without waiting: the graph is queued too
        y.add_(1)  # later work waits for the graph
    assert y.cpu().eq(4.0).all()  # (1 * 2 + 1) + 1: the graph ran after x.add_ and before y.add_


def test_compiled_graph_runs_on_the_stream_it_is_called_on(gate):
    compiled = torch.compile(_double_plus_one)
    x = torch.full((256,), 5.0, device="npu")
    compiled(x)
    npu.synchronize()
    s = npu.Stream()
    with gate(npu.current_stream()):
        with npu.stream(s):
            y = compiled(x)
        s.synchronize()
        value = read_f32(y, 255)  # (a failing assert must not print y: the gate holds it)
        assert value == 11.0


def test_dynamic_shapes_allocate_outputs_from_the_arguments():
    compiled = torch.compile(lambda a, b: (a * b).sum(1) + 1)
    for n in (3, 5, 9):
        a = torch.randn(n, 7, device="npu")
        b = torch.randn(n, 7, device="npu")
        torch.testing.assert_close(compiled(a, b).cpu(), ((a * b).sum(1) + 1).cpu())


def test_cpu_output_is_ready_when_returned(gate):
    compiled = torch.compile(lambda a: (a + 2).cpu())
    x = torch.full((64,), 1.0, device="npu")
    assert compiled(x).eq(3.0).all()


def test_stream_operations_inside_an_inductor_graph_are_refused():
    s = npu.Stream()

    def f(a):
        with torch.npu.stream(s):
            b = a + 1
        torch.npu.current_stream().wait_stream(s)
        return b

    with pytest.raises(Exception, match="cannot run the stream operation .* backend='aot_eager'"):
        torch.compile(f)(torch.ones(4, device="npu"))


def test_graphs_over_two_devices_are_refused():
    def f(a, b):
        return a + b.to("npu:0")

    with pytest.raises(Exception, match=r"graphs of one npu device, but this graph uses \['npu:0', 'npu:1'\]"):
        torch.compile(f)(torch.ones(4, device="npu:0"), torch.ones(4, device="npu:1"))


# --- mode="reduce-overhead": the compiled graphs replayed as NPU graphs -------
# (Note [Compiled functions replayed as NPU graphs]; the runner's own behaviour
# is tested without Inductor in test_compile_npugraphs.py)


def test_reduce_overhead_replays_forward_and_backward_as_npu_graphs():
    from torch._dynamo.utils import counters

    counters.clear()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).npu()
    compiled = torch.compile(model, mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(6, 8, device="npu")
        expected = model(x)
        expected.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        out = compiled(x)
        out.square().sum().backward()
        torch.testing.assert_close(out.cpu(), expected.cpu())
        for p, g in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad.cpu(), g.cpu())
        model.zero_grad()
    # The backward once; the forward twice, because the previous iteration's
    # `out` is alive during the call: two recordings of it alternate.
    assert counters["npugraphs"]["record"] == 3
    assert counters["npugraphs"]["replay"] == 6
    assert counters["npugraphs"]["eager"] == 0


def test_reduce_overhead_writes_input_mutations_back_to_the_caller(gate):
    from torch._dynamo.utils import counters

    counters.clear()

    def bump(x):
        x.add_(1)
        return x * 2

    compiled = torch.compile(bump, mode="reduce-overhead")
    for i in range(4):
        x = torch.full((16,), float(i), device="npu")
        out = compiled(x)
        torch.testing.assert_close(x.cpu(), torch.full((16,), i + 1.0))
        torch.testing.assert_close(out.cpu(), torch.full((16,), 2.0 * (i + 1)))
    assert counters["npugraphs"]["replay"] == 3
    # a replay is a task of the current stream, like the graph it replays
    x = torch.full((16,), 10.0, device="npu")
    npu.synchronize()
    g = gate(npu.current_stream())
    out = compiled(x)
    assert read_f32(x) == 10.0
    g.release()
    npu.synchronize()
    assert read_f32(x) == 11.0 and read_f32(out) == 22.0
