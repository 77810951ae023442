"""torch.compile on npu with the eager and aot_eager backends: Dynamo's npu device
interface (torch_npu.utils._dynamo_device), streams and events in compiled code
(Note [Npu streams in compiled code]), the host task that compiled graphs run
as, and bad uses. Inductor (the default backend) is in test_compile_inductor.py,
behind `make test-compile` (C++ compilation takes tens of seconds).

Stream order is checked with gates (a blocked stream), never with timing: work
that ran on the wrong stream, or on the host out of order, gives a wrong value.
"""
import sys

import pytest
import torch
import torch_npu

from conftest import read_f32

import torch._dynamo  # noqa: E402  (after torch_npu: its import hook sets Dynamo up)
from torch._dynamo.device_interface import get_interface_for_device  # noqa: E402

npu = torch_npu.npu
BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _ready(*shape: int, value: float = 0.0) -> torch.Tensor:
    """A float32 npu tensor whose value is written before the test goes on."""
    t = torch.full(shape, value, device="npu")
    npu.synchronize()
    return t


# --- the device interface ----------------------------------------------------


def test_interface_is_registered_for_npu_and_its_devices():
    from torch_npu.utils._dynamo import _dynamo_register_interface_for_device
    from torch_npu.utils._dynamo_device import NpuInterface

    _dynamo_register_interface_for_device()  # idempotent
    assert get_interface_for_device("npu") is NpuInterface
    assert get_interface_for_device(torch.device("npu", 1)) is NpuInterface
    assert get_interface_for_device("npu:1") is NpuInterface


def test_interface_values_match_torch_npu():
    itf = get_interface_for_device("npu")
    assert itf.is_available() and itf.device_count() == npu.device_count()
    assert itf.current_device() == npu.current_device()
    assert itf.Stream is npu.Stream and itf.Event is npu.Event
    assert itf.get_compute_capability(0) == npu.get_device_name(0)
    assert itf.get_device_properties(0).name == npu.get_device_properties(0).name
    assert itf.Worker.get_device_properties("npu:0").total_memory == npu.get_device_properties(0).total_memory
    assert itf.is_bf16_supported() is True and itf.is_dtype_supported(torch.bfloat16)
    x = torch.empty(1024, device="npu")
    assert itf.memory_allocated() == npu.memory_allocated()
    del x
    assert itf.is_triton_capable() is False


@pytest.mark.parametrize("device", [0, 1])
def test_get_raw_stream_is_the_current_stream(device):
    itf = get_interface_for_device("npu")
    s = npu.Stream(device=device)
    with npu.stream(s):
        assert itf.get_raw_stream(device) == s.npu_stream == npu.current_stream(device).npu_stream
    assert itf.get_raw_stream(device) == npu.default_stream(device).npu_stream


def test_interface_switches_devices_and_streams():
    itf = get_interface_for_device("npu")
    assert itf.exchange_device(1) == 0 and npu.current_device() == 1
    assert itf.maybe_exchange_device(0) == 1 and npu.current_device() == 0
    assert itf.exchange_device(-1) == -1 and npu.current_device() == 0
    s = npu.Stream()
    itf._set_stream_by_id(s.stream_id, s.device_index, s.device_type)
    assert npu.current_stream() == s
    itf.set_stream(npu.default_stream())
    with itf.device(1):
        assert itf.current_device() == 1


def test_interface_rejects_bad_devices():
    itf = get_interface_for_device("npu")
    with pytest.raises(ValueError, match="Expected an npu device, but got cpu"):
        itf.get_compute_capability("cpu")
    with pytest.raises(ValueError, match="Invalid npu device index 7"):
        itf.Worker.get_device_properties(7)
    with pytest.raises(TypeError, match="got float"):
        itf.get_compute_capability(1.5)
    with pytest.raises(RuntimeError, match="Triton is not available for npu"):
        itf.raise_if_triton_unavailable()


def test_import_torch_npu_does_not_import_dynamo(run_py):
    out = run_py(
        """
        import sys, torch, torch_npu
        print("torch._dynamo" in sys.modules)
        import torch._dynamo
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("npu").__name__)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "NpuInterface"]


# --- compiled functions match eager -------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_function_matches_eager(backend):
    w = torch.randn(6, 6, device="npu")

    def f(a):
        return torch.relu(a.sin() * 2 + 1) @ w + a.sum(0) + torch.ones(6, device="npu")

    x = torch.randn(4, 6, device="npu")
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x).cpu(), f(x).cpu())


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_training_step_matches_eager(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).npu()
    x = torch.randn(5, 8, device="npu")
    model(x).square().sum().backward()
    expected = [p.grad.cpu() for p in model.parameters()]
    model.zero_grad()
    torch.compile(model, backend=backend)(x).square().sum().backward()
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad.cpu(), g)


# --- streams and events in compiled code ----------------------------------------


def _add_one_on_context(s):
    def f(a):
        with torch.npu.stream(s):
            return a + 1
    return f


def _add_one_on_stream(s):
    def f(a):
        with s:
            return a + 1
    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", [_add_one_on_context, _add_one_on_stream], ids=["npu.stream(s)", "with s"])
def test_ops_in_a_stream_context_run_on_that_stream(backend, form, gate):
    # The caller's stream is blocked: if the block's op ran there, y would
    # still be unwritten after s.synchronize().
    s = npu.Stream()
    x = _ready(256, value=3.0)
    compiled = torch.compile(form(s), backend=backend, fullgraph=True)
    with gate(npu.current_stream()):
        y = compiled(x)
        s.synchronize()
        value = read_f32(y, 255)  # (a failing assert must not print y: the gate holds it)
        assert value == 4.0
    assert npu.current_stream() == npu.default_stream()  # the context was left


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_stream_in_compiled_code_orders_the_streams(backend, gate):
    s = npu.Stream()
    x = _ready(256)

    def f(a):
        with torch.npu.stream(s):
            a.add_(1)  # queued behind the gate on s
        torch.npu.current_stream().wait_stream(s)
        return a * 2

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    with gate(s):
        y = compiled(x)
    # Without the wait, a * 2 could have read a before the add.
    assert y.cpu().eq(2.0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_events_in_compiled_code_order_the_streams(backend, gate):
    s = npu.Stream()
    x = _ready(256)

    def f(a):
        b = a + 1  # caller's stream, behind the gate
        e = torch.npu.Event()
        e.record()
        s.wait_event(e)
        with torch.npu.stream(s):
            c = b * 3
        done = torch.npu.Event()
        done.record(s)
        done.wait()
        return c

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    with gate(npu.current_stream()):
        c = compiled(x)
    assert c.cpu().eq(3.0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_streams_created_in_compiled_code(backend):
    x = _ready(64, value=1.0)

    def f(a):
        side = torch.npu.Stream()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            b = a * 5
        torch.npu.current_stream().wait_stream(side)
        return b

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    assert compiled(x).cpu().eq(5.0).all()
    assert compiled(x).cpu().eq(5.0).all()  # a second call builds its stream again


def test_stream_none_is_a_no_op_in_compiled_code():
    def f(a):
        with torch.npu.stream(None):
            return a + 1

    x = _ready(8)
    assert torch.compile(f, backend="eager", fullgraph=True)(x).cpu().eq(1.0).all()


def test_set_stream_breaks_the_graph_and_stays_correct(gate):
    s = npu.Stream()
    x = _ready(256, value=1.0)

    def f(a):
        torch.npu.set_stream(s)  # not traced: runs between two graphs
        b = a + 1
        torch.npu.set_stream(torch.npu.default_stream())
        return b

    compiled = torch.compile(f, backend="eager")
    with gate(npu.current_stream()):
        y = compiled(x)
        s.synchronize()
        value = read_f32(y, 0)
        assert value == 2.0
    torch._dynamo.reset()  # else the graph-broken frames compiled above are reused
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(f, backend="eager", fullgraph=True)(x)


def test_npu_stream_of_a_non_stream_is_refused():
    def f(a):
        with torch.npu.stream(a):
            return a + 1

    with pytest.raises(torch._dynamo.exc.Unsupported, match="torch.npu.stream expects a torch.npu.Stream"):
        torch.compile(f, backend="eager", fullgraph=True)(_ready(4))


# --- the host task compiled graphs run as ----------------------------------------


def test_host_task_runs_in_stream_order(gate):
    s = npu.Stream()
    x = _ready(16)
    seen = []
    with npu.stream(s):
        with gate(s):
            x.add_(1)
            torch_npu._C._npu_launchHostTask(s, lambda _: seen.append(read_f32(x)), None)
            x.add_(1)
            assert seen == []
    s.synchronize()
    assert seen == [1.0] and x.cpu().eq(2.0).all()


def test_host_task_exception_is_a_stream_failure():
    s = npu.Stream()

    def boom(_):
        raise ValueError("kernel went wrong")

    torch_npu._C._npu_launchHostTask(s, boom, None)
    with pytest.raises(RuntimeError, match="host task.*ValueError: kernel went wrong"):
        s.synchronize()
    s.synchronize()  # reported once; the stream is usable again


def test_host_task_rejects_bad_arguments():
    with pytest.raises(TypeError, match="expects a callable, but got int"):
        torch_npu._C._npu_launchHostTask(npu.current_stream(), 3, None)
    with pytest.raises((TypeError, RuntimeError)):
        torch_npu._C._npu_launchHostTask("stream", lambda _: None, None)


def test_device_interface_module_exists_as_torch_npu_has_it():
    assert "torch_npu.utils._dynamo_device" in sys.modules
