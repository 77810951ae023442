"""Host callbacks: torch_npu's _launch_host_func, _launch_host_func_pending,
_subscribe_report, _unsubscribe_report (and launch_callback on top of them):
stream order, callbacks in captured graphs, exceptions reported, not fatal.
"""
import sys
import threading

import pytest
import torch
import torch_npu

from conftest import read_f32

npu = torch_npu.npu


def test_callbacks_run_in_stream_order_after_earlier_work(gate):
    s = npu.Stream()
    npu._subscribe_report(s)
    x = torch.zeros(1024, device="npu")
    npu.synchronize()  # x is written on the default stream
    seen = []
    with npu.stream(s):
        gt = gate(s)
        x.add_(1)
        npu._launch_host_func(s, lambda d: seen.append((d, read_f32(x))), "first")
        x.add_(1)
        npu._launch_host_func(s, lambda d: seen.append((d, read_f32(x))), "second")
        assert seen == []  # the stream is blocked: nothing ran yet
        gt.release()
    npu._unsubscribe_report(s)  # waits for the stream's callbacks
    assert seen == [("first", 1.0), ("second", 2.0)]


def test_later_work_waits_for_the_callback():
    s = npu.Stream()
    go = threading.Event()
    x = torch.zeros(16, device="npu")
    npu.synchronize()

    def hold(_):
        go.wait(30)

    with npu.stream(s):
        npu._launch_host_func(s, hold, None)
        x.add_(5)
        assert read_f32(x) == 0.0  # behind the callback
        go.set()
        s.synchronize()
    assert read_f32(x) == 5.0


def test_exception_in_callback_is_reported_not_fatal(monkeypatch):
    reports = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reports.append(u.exc_value))
    s = npu.Stream()

    def boom(_):
        raise ValueError("callback failed")

    x = torch.ones(4, device="npu")
    npu.synchronize()
    with npu.stream(s):
        npu._launch_host_func(s, boom, None)
        x.add_(1)
        s.synchronize()  # no task failure
    assert any(isinstance(e, ValueError) and "callback failed" in str(e) for e in reports)
    assert x.cpu().tolist() == [2.0] * 4


def test_captured_callbacks_run_at_every_replay():
    calls = []
    x = torch.ones(4, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        x.mul_(2)
        npu._launch_host_func(npu.current_stream(), lambda d: calls.append((d, read_f32(x))), "cb")
    assert calls == []
    for _ in range(3):
        g.replay()
    npu.synchronize()
    assert calls == [("cb", 2.0), ("cb", 4.0), ("cb", 8.0)]


def test_pending_callback_runs_on_the_main_thread_without_holding_the_stream():
    s = npu.Stream()
    seen = []
    with npu.stream(s):
        npu._launch_host_func_pending(s, lambda d: seen.append((d, threading.current_thread())), 7)
        s.synchronize()
    for _ in range(1000):  # pending calls run at the interpreter's next check
        if seen:
            break
        sum(range(100))
    assert seen and seen[0][0] == 7 and seen[0][1] is threading.main_thread()


def test_launch_callback_older_name():
    hits = []
    npu.launch_callback(lambda: hits.append(1))
    npu.synchronize()
    assert hits == [1]
    with pytest.raises(TypeError, match="callable"):
        npu._launch_host_func(npu.current_stream(), 3, None)
