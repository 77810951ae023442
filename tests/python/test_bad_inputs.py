"""Bad inputs to the functions of the other files: each gets a clear Python
exception (type and message checked) and leaves the device usable (the
autouse fixture in conftest.py then synchronizes both devices and runs a
computation). Covers device indices, device types, stream triples (npu and
generic ``torch.Stream``), RNG states, memory functions, erase_stream,
tensors on different devices in one op, and a failing op inside a task that
is reported at the next synchronize naming the operator."""

import pytest
import torch
import torch_npu

from conftest import NPU_DEVICE_TYPE, device_works, run_py_ok

T = NPU_DEVICE_TYPE
INVALID_INDEX = r"Invalid device_index: {}"


@pytest.mark.parametrize("call,exc,match", [
    (lambda: torch.npu.set_device(99), RuntimeError, INVALID_INDEX.format(99)),
    (lambda: torch.npu.set_device(-5), RuntimeError, INVALID_INDEX.format(-5)),
    (lambda: torch.npu.set_device("npu:2"), RuntimeError, INVALID_INDEX.format(2)),
    (lambda: torch.npu.set_device("cpu"), ValueError, "Expected a npu device, but got"),
    (lambda: torch.npu.set_device(1.5), TypeError, "Expected a torch.device, str, int or None, but got float"),
    (lambda: torch.npu.synchronize("cpu"), ValueError, "Expected a npu device, but got"),
    (lambda: torch.npu.synchronize(torch.device("cpu")), ValueError, "Expected a npu device, but got"),
    (lambda: torch.npu.synchronize(5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.synchronize(-3), RuntimeError, INVALID_INDEX.format(-3)),
    (lambda: torch.npu.device("npu:7").__enter__(), RuntimeError, INVALID_INDEX.format(7)),
    (lambda: torch.npu.get_device_properties(42), RuntimeError, INVALID_INDEX.format(42)),
    (lambda: torch.npu.get_device_name(42), RuntimeError, INVALID_INDEX.format(42)),
    (lambda: torch.npu.current_stream(7), RuntimeError, INVALID_INDEX.format(7)),
    (lambda: torch.npu.default_stream(-2), RuntimeError, INVALID_INDEX.format(-2)),
    (lambda: torch.npu.set_stream("x"), TypeError, "set_stream expects a torch_npu.npu.Stream, but got str"),
    (lambda: torch.accelerator.set_device_index(9), RuntimeError, INVALID_INDEX.format(9)),
    (lambda: torch.accelerator.current_stream(9), RuntimeError, INVALID_INDEX.format(9)),
    (lambda: torch.accelerator.synchronize(9), RuntimeError, INVALID_INDEX.format(9)),
    (lambda: torch.ones(2, device="npu:5"), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.ones(2).to("npu:9"), RuntimeError, INVALID_INDEX.format(9)),
    (lambda: torch.empty(-1, device="npu"), RuntimeError, "negative dimension"),
], ids=lambda x: None)
def test_bad_device_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
    assert torch.npu.current_device() == 0
    device_works(0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(stream_id=99999, device_index=0, device_type=T), "Unrecognized stream 99999"),
    (dict(stream_id=-7, device_index=0, device_type=T), "Unrecognized stream -7"),
    (dict(stream_id=0, device_index=999, device_type=T), INVALID_INDEX.format(999)),
    (dict(stream_id=0, device_index=-5, device_type=T), INVALID_INDEX.format(-5)),
    (dict(stream_id=0, device_index=0, device_type=999), "Invalid device_type: 999"),
    (dict(stream_id=0, device_index=0, device_type=0), r"Expected a npu stream, but got a stream of device cpu \(device_type 0\)"),
    (dict(stream_id=64 + 4, device_index=0, device_type=T), "Invalid sync launch stream index 4"),
    (dict(stream_id=(1 << 30) | 12345, device_index=0, device_type=T), "Unrecognized external NPU stream"),
])
def test_npu_stream_from_bad_triple(kwargs, match):
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu.Stream(**kwargs)
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu.set_stream(torch.Stream(**kwargs) if kwargs["device_index"] < 128 and kwargs["device_type"] < 64
                                 else torch_npu.npu.Stream(**kwargs))
    assert torch.npu.current_stream() == torch.npu.default_stream()


@pytest.mark.parametrize("call,exc,match", [
    (lambda: torch.npu.Stream(device="cpu"), ValueError, "Expected a npu device, but got: cpu"),
    (lambda: torch.npu.Stream(device=5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.Stream(device="npu:5"), RuntimeError, INVALID_INDEX.format(5)),
])
def test_bad_stream_devices(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


CPU_STREAM = r"Expected a npu stream, but got a stream of device cpu \(device_type 0\)"


@pytest.mark.parametrize("api,call", [
    ("set_stream", lambda s: torch_npu.npu.set_stream(s)),
    ("torch_npu.npu.stream", lambda s: torch_npu.npu.stream(s).__enter__()),
    ("torch_npu.npu.stream", lambda s: torch_npu.npu.StreamContext(s).__enter__()),
    ("wait_stream", lambda s: torch_npu.npu.Stream().wait_stream(s)),
    ("Event.wait", lambda s: torch_npu.npu.Event().wait(s)),
    ("ExternalEvent.wait", lambda s: torch_npu.npu.ExternalEvent().wait(s)),
    ("ExternalEvent.reset", lambda s: torch_npu.npu.ExternalEvent().reset(s)),
    ("set_stream_limit", lambda s: torch_npu.npu.set_stream_limit(s, 1)),
    ("get_stream_limit", lambda s: torch_npu.npu.get_stream_limit(s)),
    ("erase_stream", lambda s: torch_npu.erase_stream(torch.ones(1, device="npu"), s)),
], ids=lambda x: x if isinstance(x, str) else None)
def test_cpu_stream_is_named_as_such(api, call):
    # A stream of another device used to fail as "Invalid device_index: -1"
    # (the cpu stream's index), or inside PyTorch's cpu guard.
    with pytest.raises(RuntimeError, match=rf"^{api}: {CPU_STREAM}\. Pass a torch_npu.npu.Stream"):
        call(torch.Stream(device="cpu"))
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert torch.npu.current_device() == 0


def test_cpu_stream_in_event_record_and_accelerator():
    cpu = torch.Stream(device="cpu")
    for event in (torch_npu.npu.Event(), torch_npu.npu.ExternalEvent()):
        with pytest.raises(RuntimeError, match="Event device type npu does not match recording stream's device type cpu"):
            event.record(cpu)
    with pytest.raises(RuntimeError, match="doesn't match the current accelerator"):
        torch.accelerator.set_stream(cpu)  # PyTorch's own check, before the guard
    with pytest.raises(RuntimeError, match=CPU_STREAM):
        torch_npu.npu.Stream(stream_id=cpu.stream_id, device_index=cpu.device_index, device_type=cpu.device_type)
    assert torch.npu.current_stream() == torch.npu.default_stream()


# The generic torch.Stream(stream_id=..., ...) constructor is PyTorch's and
# does not consult the backend; using such a stream must fail as a user error
# (not an internal assert, not a read of garbage) and must never become the
# current stream. Run in a subprocess: the failure mode may be a crash.
GENERIC_BAD_TRIPLES = """
import torch, torch_npu
T = torch.npu.default_stream().device_type
triple = {triple}
s = torch.Stream(stream_id=triple[0], device_index=triple[1], device_type=T)
for name, fn in [("query", s.query), ("synchronize", s.synchronize),
                 ("set_stream", lambda: torch.accelerator.set_stream(s)),
                 ("enter", s.__enter__),
                 ("record", lambda: torch.Event(device="npu").record(s))]:
    try:
        fn()
        print(name, "NO ERROR")
    except RuntimeError as e:
        msg = str(e).splitlines()[0]
        print(name, "INTERNAL" if "INTERNAL ASSERT" in msg else "USER", msg)
print("current", torch.accelerator.current_stream().stream_id)
print("works", (torch.ones(3, device="npu") + 1).sum().item())
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("triple,match", [
    ((99999, 0), "Unrecognized stream 99999"),
    ((-1, 0), "Unrecognized .*stream -1"),
    ((0, 999), "-25"),  # PyTorch's DeviceIndex is int8: 999 arrives as -25
])
def test_generic_torch_stream_with_bad_triple(triple, match):
    import re

    out = run_py_ok(GENERIC_BAD_TRIPLES.format(triple=triple))
    lines = dict(l.split(" ", 1) for l in out.splitlines())
    for name in ("query", "synchronize", "set_stream", "enter", "record"):
        assert lines[name].startswith("USER") and re.search(match, lines[name]), out
    assert lines["current"] == "0", out
    assert lines["works"] == "6.0", out


@pytest.mark.parametrize("call,exc,match", [
    (lambda: torch.npu.set_rng_state(torch.zeros(3)), RuntimeError, "Expected the RNG state to be a torch.ByteTensor"),
    (lambda: torch.npu.set_rng_state(torch.zeros(3, dtype=torch.uint8)), RuntimeError, "Expected an RNG state of 16 bytes, but got 3"),
    (lambda: torch.npu.set_rng_state([1, 2]), TypeError, "set_rng_state expects a torch.ByteTensor, but got list"),
    (lambda: torch.npu.get_rng_state(5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.set_rng_state(torch.npu.get_rng_state(), device=5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.manual_seed("abc"), ValueError, "invalid literal for int"),
])
def test_bad_rng_inputs(call, exc, match):
    torch.npu.manual_seed(3)
    want = torch.randn(5, device="npu").cpu()
    torch.npu.manual_seed(3)
    with pytest.raises(exc, match=match):
        call()
    assert torch.equal(torch.randn(5, device="npu").cpu(), want)  # state untouched


@pytest.mark.parametrize("call,exc,match", [
    (lambda: torch.npu.memory_allocated(5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.memory_stats("cpu"), ValueError, "Expected a npu device, but got: cpu"),
    (lambda: torch.npu.memory_summary(5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.reset_peak_memory_stats(5), RuntimeError, INVALID_INDEX.format(5)),
    (lambda: torch.npu.max_memory_reserved(-4), RuntimeError, INVALID_INDEX.format(-4)),
    (lambda: torch_npu.erase_stream(3, torch.npu.Stream()), TypeError, "erase_stream expects a torch.Tensor, but got int"),
    (lambda: torch_npu.erase_stream(torch.ones(2), torch.npu.Stream()), RuntimeError, "erase_stream expects an npu tensor, but got a tensor on cpu"),
    (lambda: torch_npu.erase_stream(torch.ones(2, device="npu"), 5), TypeError, "erase_stream expects a torch_npu.npu.Stream, but got int"),
])
def test_bad_memory_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_tensors_on_different_npu_devices():
    a, b = torch.ones(3, device="npu:0"), torch.ones(3, device="npu:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*npu:0 and npu:1"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(a.view(3, 1), b.view(1, 3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*npu:0 and cpu"):
        a + torch.ones(3)
    assert (a + 1).sum().item() == 6 and (b + 1).sum().item() == 6


def test_shape_errors_raise_at_the_call():
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        torch.ones(3, 4, device="npu") @ torch.ones(3, 4, device="npu")
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.ones(2, device="npu") + torch.ones(3, device="npu")


@pytest.mark.parametrize("dst_dev,src_dev", [("npu:0", "npu:0"), ("npu:0", "npu:1"), ("npu:0", "cpu")])
def test_copy_with_mismatched_shapes_raises_at_the_call(dst_dev, src_dev):
    dst = torch.zeros(2, device=dst_dev)
    try:
        with pytest.raises(RuntimeError, match="must match the size|expand|broadcast"):
            dst.copy_(torch.ones(3, device=src_dev))  # as on cpu and cuda: raised here
    finally:
        # If the copy was queued instead, its failure is pending: report it
        # here so that this test fails alone, not the fixture's teardown.
        for d in (0, 1):
            try:
                torch.npu.synchronize(d)
            except RuntimeError:
                pass
    # nothing left pending: the error was raised by the copy itself
    torch.npu.synchronize(0)
    torch.npu.synchronize(1)
    assert dst.sum().item() == 0


@pytest.mark.parametrize("name,launch", [
    ("aten::gather", lambda x: torch.gather(x, 0, torch.tensor([0, 10], device="npu"))),
    ("aten::index", lambda x: x[torch.tensor([7], device="npu")]),
    ("aten::index_select", lambda x: torch.index_select(x, 0, torch.tensor([5], device="npu"))),
    ("aten::(_index_put_impl_|index_put_)", lambda x: x.index_put_((torch.tensor([9], device="npu"),), torch.tensor(1.0, device="npu"))),
])
def test_failing_task_reported_at_synchronize(name, launch):
    x = torch.arange(5.0, device="npu")
    launch(x)  # returns: the check happens in the kernel, on the device
    with pytest.raises(RuntimeError, match=f"{name}.*out of (bounds|range)"):
        torch.npu.synchronize()
    torch.npu.synchronize()  # reported once
    if "index_put" in name:
        # The failed op wrote x in place: x holds no valid data any more and
        # says so on every read (Note [Poisoned memory]), until overwritten.
        for _ in range(2):
            with pytest.raises(RuntimeError, match=f"no valid data.*{name}.*out of (bounds|range)"):
                (x + 1).sum().item()
        x.copy_(torch.arange(5.0))
    assert (x + 1).sum().item() == 15


def test_failing_task_reported_at_stream_synchronize_and_item():
    s = torch.npu.Stream()
    x = torch.arange(5.0, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s):
        bad = torch.gather(x, 0, torch.tensor([0, 10], device="npu"))
        with pytest.raises(RuntimeError, match="aten::gather.*out of bounds"):
            bad.sum().item()
        assert (x * 2).sum().item() == 20
    s.synchronize()
    assert s.query()


def test_failing_task_on_side_stream_does_not_poison_default():
    s = torch.npu.Stream()
    x = torch.arange(5.0, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s):
        torch.gather(x, 0, torch.tensor([10], device="npu"))
    assert (x + 1).sum().item() == 15  # default stream unaffected
    with pytest.raises(RuntimeError, match="aten::gather"):
        s.synchronize()
    with torch.npu.stream(s):
        assert (x + 2).sum().item() == 20


def test_event_errors():
    e = torch.npu.Event()
    e.record(torch.npu.Stream(device=0))
    with pytest.raises(RuntimeError, match="Event device 0 does not match recording stream's device 1."):
        e.record(torch.npu.Stream(device=1))
    with pytest.raises(RuntimeError, match="does not match recording stream's device type"):
        torch.npu.Event().record(torch.Stream(device="cpu"))
    e.synchronize()


_F64 = lambda: torch.ones(3, 3, device="npu", dtype=torch.float64)  # noqa: E731
_F16 = lambda: torch.ones(3, 3, device="npu", dtype=torch.float16)  # noqa: E731


@pytest.mark.parametrize("call,match", [
    (lambda: torch.mm(_F64(), _F16()), "expected m1 and m2 to have the same dtype"),
    (lambda: _F64() @ _F16(), "expected m1 and m2 to have the same dtype"),
    (lambda: torch.bmm(_F64()[None], _F16()[None]), "same dtype|expected scalar type"),
    (lambda: torch.addmm(_F64(), _F64(), _F16()), "same dtype|expected scalar type"),
    (lambda: torch.baddbmm(_F64()[None], _F64()[None], _F16()[None]), "same dtype|expected scalar type"),
    (lambda: torch.addmv(_F64()[0], _F64(), _F16()[0]), "same dtype|expected scalar type|dtype"),
    (lambda: torch._assert_async(torch.tensor([], device="npu")), "Boolean value of Tensor with no values is ambiguous"),
    (lambda: torch._assert_async(torch.tensor([0, 0], device="npu")),
     "Boolean value of Tensor with more than one value is ambiguous"),
])
def test_argument_errors_cpu_raises_at_the_call_raise_at_the_call(call, match):
    # Note [Argument checks the meta kernels leave to the kernel]: refused at the call (as on
    # CPU and CUDA), not by a task at the next synchronize; the stream stays clean.
    with pytest.raises(RuntimeError, match=match):
        call()
    torch.npu.current_stream().synchronize()  # nothing failed later
    device_works()


def test_mixed_dtype_matmul_checks_do_not_change_valid_calls():
    a = torch.arange(9.0, device="npu").reshape(3, 3)
    assert torch.equal(torch.mm(a, a).cpu(), torch.mm(a.cpu(), a.cpu()))
    assert torch.equal(torch.addmm(a, a, a, beta=2).cpu(), torch.addmm(a.cpu(), a.cpu(), a.cpu(), beta=2))
    torch._assert_async(torch.tensor(1, device="npu"))
    torch._assert_async(torch.tensor(0, device="npu"))  # a false value fails like CUDA's device assert
    with pytest.raises(RuntimeError, match="_assert_async"):
        torch.npu.synchronize()


@pytest.mark.parametrize("call", [
    lambda x: torch.cudnn_convolution(x, torch.ones(3, 2, 3, 3, device="npu"), (0, 0), (1, 1), (1, 1), 1,
                                      False, False, True),
    lambda x: torch.cudnn_grid_sampler(x, torch.zeros(1, 5, 5, 2, device="npu")),
])
def test_ops_without_a_cpu_kernel_are_refused_at_the_call(call):
    # Note [Ops without a CPU kernel]: nothing is queued, so no later synchronize fails.
    x = torch.ones(1, 2, 5, 5, device="npu")
    with pytest.raises(NotImplementedError, match="is not supported on npu: the simulated NPU runs every "
                                                  "operator through its CPU kernel, and this one has none"):
        call(x)
    torch.npu.synchronize()
    device_works()


_INT = lambda: torch.arange(4, dtype=torch.int32, device="npu")  # noqa: E731


@pytest.mark.parametrize("call", [
    lambda x: x.add_(1.5),
    lambda x: x.mul_(torch.ones(4, device=x.device)),
    lambda x: x.div_(2),
    lambda x: x.sin_(),
    lambda x: x.clamp_(0.5),
    lambda x: torch.add(x, 1.5, out=x),
])
def test_in_place_results_of_an_impossible_dtype_raise_at_the_call_and_leave_the_tensor(call):
    # Note [Kernels the host waits for raise at the call]: CPU's message, at the call; the
    # tensor keeps its values (not poisoned) and the stream keeps working.
    x = _INT()
    with pytest.raises(RuntimeError, match=r"^result type Float can't be cast to the desired output type [Ii]nt$"):
        call(x)
    with pytest.raises(RuntimeError, match=r"result type Float can't be cast"):
        call(x.cpu())  # the same error as on CPU
    torch.npu.synchronize()  # nothing failed later
    assert x.tolist() == [0, 1, 2, 3]
    device_works()


def test_a_failing_synchronous_kernel_raises_its_own_exception_type_once():
    # unique_dim has no meta kernel (data-dependent shape): its CPU kernel runs on the stream
    # while the host waits, and its IndexError is the call's, as on CPU.
    x = torch.arange(6.0, device="npu")
    y = x * 2  # queued ahead of the failing kernel on the same stream
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 5\)"):
        torch.unique(x, dim=5)
    torch.npu.synchronize()  # reported once: not again here
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]  # the work ahead of it was not discarded
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        torch.bincount(torch.tensor([-1], device="npu"))
    torch.npu.synchronize()
    device_works()


@pytest.mark.parametrize("make", [
    lambda: torch.ones(2, device="npu"),
    lambda: torch.nn.Parameter(torch.ones(2, device="npu")),
    lambda: torch.ones(2, device="npu")[1:],
    lambda: torch.ones(2, device="npu").untyped_storage(),
])
def test_sending_npu_memory_to_another_process_is_refused_at_the_put(make):
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()  # a pipe; no process is started
    with pytest.raises(RuntimeError, match=r"Cannot send an npu (tensor|storage) to another process: "
                                           r"the simulated NPU has no inter-process memory"):
        queue.put(make())
    queue.put(torch.ones(2))  # CPU tensors still go through PyTorch's shared memory
    assert torch.equal(queue.get(), torch.ones(2))
