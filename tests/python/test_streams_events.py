"""Streams and events at the level of PyTorch's generic API on npu (issue 3):
``torch.Stream`` / ``torch.Event`` / ``torch.accelerator`` going through the
guard implementation, and ``torch_npu.npu.current_stream`` / ``default_stream``
/ ``set_stream`` / ``stream``. Ordering across streams is shown with a stream
gate (a blocked stream) or NPU_SIM_TASK_DELAY_US, never by sleeping.

The full torch_npu stream API (Stream kwargs, ExternalStream, SyncLaunchStream,
ExternalEvent, ...) is tested in test_external_stream.py and its siblings."""

import pytest
import torch
import torch_npu

from conftest import NPU_DEVICE_TYPE, run_py_ok

NORMAL, HIGH = 3, 4


def test_torch_stream_on_npu_comes_from_pool():
    s = torch.Stream(device="npu")
    assert s.device_type == NPU_DEVICE_TYPE
    assert s.device == torch.device("npu:0")
    assert s.stream_id >> 5 == NORMAL
    hi = torch.Stream(device="npu", priority=-1)
    assert hi.stream_id >> 5 == HIGH
    s1 = torch.Stream(device="npu:1")
    assert s1.device_index == 1 and s1.stream_id >> 5 == NORMAL


def same(a: torch.Stream, b: torch.Stream) -> bool:
    """Same stream, whatever the Python classes: torch_npu's Stream.__eq__
    (like torch.cuda.Stream's) is False for a generic torch.Stream."""
    return (a.stream_id, a.device_index, a.device_type) == (b.stream_id, b.device_index, b.device_type)


def test_torch_stream_from_triple_round_trips():
    s = torch.Stream(device="npu:1")
    t = torch.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert t == s
    assert t.device == torch.device("npu:1")
    d = torch.Stream(stream_id=0, device_index=0, device_type=NPU_DEVICE_TYPE)
    assert same(d, torch.npu.default_stream(0))


def test_npu_stream_is_a_torch_stream_and_compares_equal():
    s = torch_npu.npu.Stream()
    g = torch.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert isinstance(s, torch.Stream)
    assert same(s, g)
    # As torch_npu (and torch.cuda.Stream): equality only with the npu Stream class.
    assert not (s == g) and not (g == s)
    assert s == torch_npu.npu.Stream(stream_id=g.stream_id, device_index=g.device_index, device_type=g.device_type)
    assert s != torch.npu.default_stream()
    assert s != "not a stream"


def test_accelerator_current_and_set_stream():
    default = torch.accelerator.current_stream()
    assert default.stream_id == 0 and default.device_type == NPU_DEVICE_TYPE
    s = torch.Stream(device="npu")
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    assert same(torch.npu.current_stream(), s)
    x = torch.arange(4.0, device="npu") + 1  # runs on s
    s.synchronize()
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]
    torch.accelerator.set_stream(default)
    assert torch.accelerator.current_stream() == default


def test_accelerator_device_functions():
    assert torch.accelerator.device_count() == torch.npu.device_count() == 2
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.npu.current_device() == 1
        assert torch.empty(1, device="npu").device.index == 1
    finally:
        torch.accelerator.set_device_index(0)
    x = torch.ones(1000, device="npu")
    y = x * 3
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    assert y.sum().item() == 3000


def test_with_torch_stream_switches_and_restores():
    s = torch.Stream(device="npu")
    before = torch.accelerator.current_stream()
    with s:
        assert torch.accelerator.current_stream() == s
        y = torch.full((3,), 2.0, device="npu") * 2
    assert torch.accelerator.current_stream() == before
    s.synchronize()
    assert y.cpu().tolist() == [4.0, 4.0, 4.0]


def test_with_torch_stream_of_other_device_switches_device():
    s1 = torch.Stream(device="npu:1")
    with s1:
        assert torch.accelerator.current_device_index() == 1
        assert torch.accelerator.current_stream(1) == s1
        x = torch.ones(2, device="npu")
        assert x.device.index == 1
    assert torch.accelerator.current_device_index() == 0
    assert torch.accelerator.current_stream(1).stream_id == 0


def test_nested_stream_contexts_restore_in_order():
    a, b = torch.Stream(device="npu"), torch.Stream(device="npu")
    with torch.npu.stream(a):
        with torch.npu.stream(b):
            assert same(torch.npu.current_stream(), b)
        assert same(torch.npu.current_stream(), a)
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_npu_stream_context_none_is_noop():
    with torch.npu.stream(None) as s:
        assert s is None
        assert torch.npu.current_stream() == torch.npu.default_stream()


def test_npu_current_default_set_stream():
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert torch.npu.default_stream(1).device_index == 1
    s1 = torch.npu.Stream(device=1)
    torch.npu.set_stream(s1)  # switches the current device as well
    assert torch.npu.current_device() == 1
    assert torch.npu.current_stream() == s1
    assert torch.npu.current_stream(0) == torch.npu.default_stream(0)
    torch.npu.set_stream(None)  # no-op
    assert torch.npu.current_stream() == s1


def test_current_stream_is_per_device():
    s0, s1 = torch.npu.Stream(device=0), torch.npu.Stream(device=1)
    torch.npu.set_stream(s1)
    torch.npu.set_stream(s0)
    assert torch.npu.current_stream(0) == s0
    assert torch.npu.current_stream(1) == s1
    assert torch.npu.current_stream("npu:1") == s1


def test_stream_query_and_synchronize_with_blocked_stream(gate):
    s = torch.Stream(device="npu")
    x = torch.zeros(16, device="npu")
    torch.npu.synchronize()
    g = gate(s)
    with s:
        x.add_(1)
    assert not s.query()
    g.release()
    s.synchronize()
    assert s.query()
    assert x.sum().item() == 16


def test_event_query_before_record_is_true():
    e = torch.Event(device="npu")
    assert e.query()
    e.synchronize()  # no-op
    torch.npu.current_stream().wait_event(e)  # no-op
    assert torch.ones(1, device="npu").item() == 1


def test_event_query_tracks_blocked_work(gate):
    s = torch.Stream(device="npu")
    g = gate(s)
    e = torch.Event(device="npu")
    e.record(s)
    assert not e.query()
    g.release()
    e.synchronize()
    assert e.query()


def test_event_elapsed_time():
    start = torch.Event(device="npu", enable_timing=True)
    end = torch.Event(device="npu", enable_timing=True)
    start.record()
    x = torch.randn(64, 64, device="npu")
    for _ in range(5):
        x = x @ x.tanh()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0


def test_event_elapsed_time_requires_timing_and_records():
    a, b = torch.Event(device="npu"), torch.Event(device="npu")
    a.record()
    b.record()
    b.synchronize()
    # PyTorch's c10::Event checks these before the backend: ValueError, as on cuda.
    with pytest.raises(ValueError, match="Both events must be created with argument 'enable_timing=True'"):
        a.elapsed_time(b)
    c = torch.Event(device="npu", enable_timing=True)
    d = torch.Event(device="npu", enable_timing=True)
    with pytest.raises(ValueError, match="must be recorded before calculating elapsed time"):
        c.elapsed_time(d)
    c.record()
    with pytest.raises(ValueError, match="must be recorded before calculating elapsed time"):
        c.elapsed_time(d)


def test_npu_event_record_wait_synchronize():
    e = torch_npu.npu.Event(enable_timing=True)
    assert e.query()
    x = torch.ones(100, device="npu") * 2
    e.record()
    s = torch_npu.npu.Stream()
    e.wait(s)
    with torch.npu.stream(s):
        y = x + 1
    s.synchronize()
    assert y.sum().item() == 300
    e2 = torch.npu.current_stream().record_event()
    e2.synchronize()
    assert e2.query()


def test_wait_stream_orders_work_across_streams(gate):
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(8, device="npu")
    torch.npu.synchronize()
    g = gate(a)
    with torch.npu.stream(a):
        x.fill_(5.0)
    b.wait_stream(a)
    with torch.npu.stream(b):
        y = x * 2
    assert not b.query()  # b waits for a, which is blocked
    g.release()
    b.synchronize()
    assert y.cpu().tolist() == [10.0] * 8


@pytest.mark.racy(reason="the control case: reads without wait_stream")
def test_without_wait_stream_reader_sees_stale_data(gate):
    # Control for the test above: with no wait, b runs while a is blocked.
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(8, device="npu")
    torch.npu.synchronize()
    g = gate(a)
    with torch.npu.stream(a):
        x.fill_(5.0)
    with torch.npu.stream(b):
        y = x * 2
    b.synchronize()
    assert y.cpu().tolist() == [0.0] * 8
    assert not a.query()
    g.release()
    a.synchronize()
    assert x.cpu().tolist() == [5.0] * 8


@pytest.mark.racy(reason="its second round reads without waiting, on purpose")
def test_event_wait_with_task_delay_in_subprocess():
    out = run_py_ok(
        """
        import ctypes, torch, torch_npu
        a, b = torch.npu.Stream(), torch.npu.Stream()
        lib = ctypes.CDLL(next(l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith("libnpurt.so")))
        lib.npuStreamSetTaskDelay.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        assert lib.npuStreamSetTaskDelay(b.npu_stream, 0) == 0  # only the writer is slow
        res = []
        for wait in (True, False):
            x = torch.zeros(1000, device="npu"); torch.npu.synchronize()
            with torch.npu.stream(a):
                for _ in range(3):
                    x.add_(1)
            if wait:
                b.wait_stream(a)
            with torch.npu.stream(b):
                y = x.clone()
            b.synchronize()
            res.append(y.sum().item())
            torch.npu.synchronize()
        print(res[0], res[1])
        """,
        env={"NPU_SIM_TASK_DELAY_US": "20000"},
    )
    with_wait, without_wait = map(float, out.split())
    assert with_wait == 3000.0
    assert without_wait == 0.0
