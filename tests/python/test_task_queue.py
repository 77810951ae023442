"""Task-queue modes and the proof that ops run on the device executor.

- TASK_QUEUE_ENABLE=0/1/2, ASCEND_LAUNCH_BLOCKING=1 and PER_STREAM_QUEUE=1,
  each in a fresh interpreter running the same multi-stream workload;
- bad values (TASK_QUEUE_ENABLE=7) raise "TASK_QUEUE_ENABLE should be 0, 1 or
  2" at first use;
- a failing task is reported at the next synchronize, naming the operator, in
  every mode (and at the launch itself with ASCEND_LAUNCH_BLOCKING=1);
- the key proof: with the stream blocked, ``x.add_(1)`` returns to the caller
  and device memory (read directly, no synchronize) is unchanged until the
  stream is released.
"""

import ast
import sys
import threading

import pytest
import torch
import torch_npu

from conftest import read_f32, run_py, run_py_ok

MODES = {
    "queue_off": {"TASK_QUEUE_ENABLE": "0"},
    "queue_on": {"TASK_QUEUE_ENABLE": "1"},
    "queue_busy_poll": {"TASK_QUEUE_ENABLE": "2"},
    "launch_blocking": {"ASCEND_LAUNCH_BLOCKING": "1"},
    "per_stream_queue": {"PER_STREAM_QUEUE": "1"},
}

EXPECTED_CONFIG = {
    "queue_off": (0, False, False),
    "queue_on": (1, False, False),
    "queue_busy_poll": (2, False, False),
    "launch_blocking": (1, True, False),
    "per_stream_queue": (1, False, True),
}

# One script per mode: config, multi-stream ordering, copies, events, a failing
# task reported at synchronize naming the op, then the device still works.
WORKLOAD = """
import torch, torch_npu
print("CONFIG", torch_npu._C._npu_taskQueueConfig())
a, b = torch.npu.Stream(), torch.npu.Stream()
x = torch.zeros(4096, device="npu")
a.wait_stream(torch.npu.current_stream())  # x is made on the default stream
with torch.npu.stream(a):
    for _ in range(20):
        x.add_(1)
b.wait_stream(a)
with torch.npu.stream(b):
    y = x * 2
e = b.record_event()
torch.npu.current_stream().wait_event(e)
z = (y + 1).sum()
assert z.item() == 4096 * 41, z.item()
c = torch.randn(7, 5)
assert torch.equal(c.npu().npu(1).cpu(), c)
assert torch.equal((c.npu() @ c.npu().t()).cpu(), c @ c.t())
src = torch.arange(5.0, device="npu")
try:
    torch.gather(src, 0, torch.tensor([0, 9], device="npu"))
    torch.npu.synchronize()
except RuntimeError as err:
    print("ERROR", str(err).replace("\\n", " "))
else:
    print("NO ERROR")
assert (src + 1).sum().item() == 15
torch.npu.synchronize()
if not torch_npu._C._npu_taskQueueConfig()[1]:
    # The executor proof (see test_op_runs_on_device_executor_not_calling_thread),
    # here in this mode: the stream is blocked by a host function until `gate`.
    import ctypes, threading
    lib = ctypes.CDLL(next(l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith("libnpurt.so")))
    lib.npuLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    gate = threading.Event()
    cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: gate.wait())
    x = torch.zeros(8, device="npu"); torch.npu.synchronize()
    s = torch.npu.current_stream()
    assert lib.npuLaunchHostFunc(s.npu_stream, ctypes.cast(cb, ctypes.c_void_p), None) == 0
    x.add_(1)
    v0 = ctypes.c_float.from_address(x.data_ptr()).value
    gate.set()
    torch.npu.synchronize()
    print("EXECUTOR", v0, ctypes.c_float.from_address(x.data_ptr()).value)
print("DONE")
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", list(MODES))
def test_workload_in_every_mode(mode):
    out = run_py_ok(WORKLOAD, env=MODES[mode])
    lines = out.splitlines()
    assert lines[0] == f"CONFIG {EXPECTED_CONFIG[mode]}"
    assert lines[-1] == "DONE"
    err = next(l for l in lines if l.startswith(("ERROR", "NO ERROR")))
    assert err.startswith("ERROR"), out
    assert "gather" in err and "out of bounds" in err
    if mode != "launch_blocking":
        assert "EXECUTOR 0.0 1.0" in lines, out


@pytest.mark.subprocess
def test_launch_blocking_raises_at_the_failing_launch():
    out = run_py_ok(
        """
        import torch, torch_npu
        src = torch.arange(5.0, device="npu")
        idx = torch.tensor([0, 9], device="npu")
        try:
            torch.gather(src, 0, idx)
        except RuntimeError as err:
            print("RAISED", "gather" in str(err), "out of bounds" in str(err))
        else:
            print("RETURNED")
        torch.npu.synchronize()  # nothing left to report
        print((src * 2).sum().item())
        """,
        env={"ASCEND_LAUNCH_BLOCKING": "1"},
    )
    assert out.split() == ["RAISED", "True", "True", "20.0"]


@pytest.mark.subprocess
@pytest.mark.parametrize("var,value,message", [
    ("TASK_QUEUE_ENABLE", "7", "TASK_QUEUE_ENABLE should be 0, 1 or 2"),
    ("TASK_QUEUE_ENABLE", "yes", "TASK_QUEUE_ENABLE should be 0, 1 or 2"),
    ("ASCEND_LAUNCH_BLOCKING", "2", "ASCEND_LAUNCH_BLOCKING should be 0 or 1"),
])
def test_bad_task_queue_value_raises_at_first_use(var, value, message):
    out = run_py_ok(
        """
        import torch, torch_npu  # importing must not fail
        for attempt in range(2):  # raised at first use, and again later
            try:
                torch.ones(3, device="npu").add_(1).sum().item()
            except RuntimeError as err:
                print("RAISED", str(err).splitlines()[0])
            else:
                print("WORKED")
        """,
        env={var: value},
    )
    lines = out.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("RAISED") and message in line, out


@pytest.mark.subprocess
@pytest.mark.racy(reason="b reads x while the next round's add_ on a writes it (no a.wait_stream(b)); only the last round's order is checked")
def test_per_stream_queue_wait_stream_with_temporary_event():
    # wait_stream records a temporary event on a's queue and waits on b's; the
    # event's destruction must not overtake the wait queued on another queue.
    out = run_py_ok(
        """
        import torch, torch_npu
        a, b = torch.npu.Stream(), torch.npu.Stream()
        x = torch.zeros(64, device="npu")
        # x is zeroed on the default stream, and each y reads x on b: a must
        # wait for both before it writes x again (without that, the program
        # races, which NPU_SIM_RACECHECK=1 reports, and y may miss adds).
        a.wait_stream(torch.npu.current_stream())
        for i in range(300):
            a.wait_stream(b)
            with torch.npu.stream(a):
                x.add_(1)
            b.wait_stream(a)
            with torch.npu.stream(b):
                y = x + 0
        b.synchronize()
        torch.npu.synchronize()
        print(y[0].item())
        """,
        env={"PER_STREAM_QUEUE": "1"},
    )
    assert out.split() == ["300.0"]


@pytest.mark.subprocess
def test_per_stream_queue_runs_streams_independently():
    # With one queue per stream, a blocked stream must not hold up another.
    out = run_py_ok(
        """
        import torch, torch_npu, threading, ctypes
        lib = ctypes.CDLL(next(l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith("libnpurt.so")))
        FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        gate = threading.Event()
        cb = FN(lambda _: gate.wait())
        a, b = torch.npu.Stream(), torch.npu.Stream()
        lib.npuLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        assert lib.npuLaunchHostFunc(a.npu_stream, ctypes.cast(cb, ctypes.c_void_p), None) == 0
        x = torch.zeros(10, device="npu"); torch.npu.default_stream().synchronize()
        with torch.npu.stream(a):
            x.add_(1)
        with torch.npu.stream(b):
            y = torch.ones(10, device="npu") * 3
        b.synchronize()
        print(y.sum().item(), a.query(), ctypes.c_float.from_address(x.data_ptr()).value)
        gate.set()
        a.synchronize()
        print(ctypes.c_float.from_address(x.data_ptr()).value)
        """,
        env={"PER_STREAM_QUEUE": "1"},
    )
    assert out.split() == ["30.0", "False", "0.0", "1.0"]


def test_op_runs_on_device_executor_not_calling_thread(gate):
    """The key proof: the op is queued, the caller returns, the executor runs it later."""
    x = torch.zeros(1024, device="npu")
    torch.npu.synchronize()
    stream = torch.npu.current_stream()
    g = gate(stream)
    returned = threading.Event()

    def caller():
        x.add_(1)
        returned.set()

    t = threading.Thread(target=caller)
    t.start()
    # If add_ ran on the calling thread (or waited for the stream), this would
    # never be set while the stream is blocked: pytest-timeout fails the test.
    returned.wait()
    t.join()
    assert read_f32(x, 0) == 0.0 and read_f32(x, 1023) == 0.0  # device memory: not yet
    assert not stream.query()
    x.mul_(3)  # queued behind add_
    assert read_f32(x, 0) == 0.0
    g.release()
    torch.npu.synchronize()
    assert read_f32(x, 0) == 3.0 and read_f32(x, 1023) == 3.0
    assert x.sum().item() == 3 * 1024


def test_out_of_place_op_result_written_later(gate):
    x = torch.ones(256, device="npu")
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    y = torch.exp(x) + 1  # output allocated now, computed later
    assert y.shape == (256,) and y.device == x.device  # metadata on the caller
    before = read_f32(y, 0)
    g.release()
    torch.npu.current_stream().synchronize()
    assert abs(read_f32(y, 0) - 3.718281828) < 1e-5
    assert before != read_f32(y, 0) or before == pytest.approx(3.7182817)  # memory was uninitialised


THREAD_NAMES = """
import glob, torch, torch_npu
(torch.ones(4, device="npu") + 1).sum().item()
names = sorted(open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm"))
print("NAMES", names)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are read from /proc")
@pytest.mark.parametrize("queue", ["1", "0"])
def test_device_threads_are_named(queue):
    """The executor threads and the task-queue consumer carry names that say
    what they are (top -H, perf, debuggers); no consumer runs without a queue."""
    out = run_py_ok(THREAD_NAMES, env={"TASK_QUEUE_ENABLE": queue})
    names = ast.literal_eval(out.split("NAMES", 1)[1].strip())
    assert "npurt d0 w0" in names and "npurt d0 w1" in names, names
    assert ("npu taskqueue" in names) == (queue == "1"), names
