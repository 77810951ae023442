"""torch_npu.npu.Event / ExternalEvent, record_stream and erase_stream.

Covers: lazy creation (device of the recording stream), query before record,
reprs, device mismatch, elapsed and recorded time texts, wait ordering (with
NPU_SIM_TASK_DELAY_US in a subprocess), thread safety of one event, the
ExternalEvent pairing rules (wait before record, one wait per record, reset,
gates that hold no core), record_stream / erase_stream.
"""

import re
import threading

import pytest
import torch

import torch_npu
from conftest import run_py_ok

npu = torch_npu.npu


def test_lazy_creation_and_repr():
    e = npu.Event()
    assert repr(e) == "<torch_npu.npu.Event uninitialized>"
    assert e.npu_event == 0 and e.device is None
    assert e.query() is True  # never recorded
    e.synchronize()           # no-op
    e.wait()                  # no-op
    e.record()
    assert re.fullmatch(r"<torch_npu.npu.Event 0x[0-9a-f]+>", repr(e))
    assert e.device == torch.device("npu:0")
    assert e._as_parameter_.value == e.npu_event
    e.synchronize()
    assert e.query()


def test_event_takes_recording_streams_device():
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    e = npu.Event()
    s1 = npu.Stream(device=1)
    e.record(s1)
    assert e.device == torch.device("npu:1")
    with pytest.raises(RuntimeError, match=r"Event device 1 does not match recording stream's device 0."):
        e.record(npu.default_stream(0))
    npu.default_stream(0).wait_event(e)  # any device may wait


def test_elapsed_and_recorded_time():
    a, b = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="Both events must be recorded before calculating elapsed time."):
        a.elapsed_time(b)
    with pytest.raises(RuntimeError, match="Event must be recorded before getting recorded timestamp."):
        a.recorded_time()
    a.record()
    x = torch.ones(1 << 16, device="npu")
    for _ in range(3):
        x = x * 1.5
    b.record()
    ms = a.elapsed_time(b)
    assert ms >= 0.0
    assert b.recorded_time() >= a.recorded_time() > 0
    c, d = npu.Event(), npu.Event()
    c.record()
    d.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        c.elapsed_time(d)


def test_record_event_and_wait_event():
    s1, s2 = npu.Stream(), npu.Stream()
    e = s1.record_event()
    assert isinstance(e, npu.Event)
    mine = npu.Event()
    assert s1.record_event(mine) is mine
    s2.wait_event(e)
    s2.wait_stream(s1)
    npu.synchronize()
    assert e.query()


def test_generic_stream_accepted_by_event():
    g = torch.Stream(device="npu")
    e = npu.Event()
    e.record(g)
    e.wait(g)
    e.synchronize()


def test_one_event_from_many_threads():
    e = npu.Event()
    streams = [npu.Stream() for _ in range(4)]
    errors = []

    def work(s):
        try:
            for _ in range(200):
                e.record(s)
                e.query()
                e.wait(npu.default_stream())
        except Exception as ex:
            errors.append(ex)

    threads = [threading.Thread(target=work, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    e.synchronize()


@pytest.mark.subprocess
def test_wait_orders_streams_with_delay():
    out = run_py_ok(
        """
        import torch, torch_npu
        npu = torch_npu.npu
        s1, s2 = npu.Stream(), npu.Stream()
        x = torch.zeros(1 << 14, device="npu"); npu.synchronize()
        with npu.stream(s1):
            x.add_(1); x.mul_(4)
        e = npu.Event(); e.record(s1)
        s2.wait_event(e)
        with npu.stream(s2):
            y = x + 1
        s2.synchronize()
        assert e.query()
        print(y[0].item())
        """,
        env={"NPU_SIM_TASK_DELAY_US": "20000"},
    )
    assert out.strip() == "5.0"


# --------------------------------------------------------------------------
# ExternalEvent
# --------------------------------------------------------------------------


def test_external_event_basics():
    e = npu.ExternalEvent()
    assert repr(e) == "<torch_npu.npu.ExternalEvent uninitialized>"
    s1, s2 = npu.Stream(), npu.Stream()
    e.record(s1)
    assert re.fullmatch(r"<torch_npu.npu.ExternalEvent 0x[0-9a-f]+>", repr(e))
    e.wait(s2)
    with pytest.raises(RuntimeError, match="External event: A single record operation cannot be associated "
                       "with multiple wait operations."):
        e.wait(s2)
    e.reset(s2)
    e.wait(s2)  # after reset: pairs with the next record (wait before record)
    e.record(s1)
    npu.synchronize()
    assert torch_npu._C._npu_externalEventPendingGates(0) == 0


@pytest.mark.subprocess
def test_external_event_wait_before_record_blocks_until_record():
    out = run_py_ok(
        """
        import time, torch, torch_npu
        npu = torch_npu.npu
        s1, s2 = npu.Stream(), npu.Stream()
        e = npu.ExternalEvent()
        x = torch.zeros(1 << 14, device="npu"); npu.synchronize()
        e.wait(s2)                     # queued before any record
        with npu.stream(s2):
            y = x + 1
        time.sleep(0.1)
        assert not s2.query()          # parked behind the gate
        with npu.stream(s1):
            x.add_(10)                 # delayed writer
        e.record(s1)
        s2.synchronize()
        print(y[0].item(), torch_npu._C._npu_externalEventPendingGates(0))
        """,
        env={"NPU_SIM_TASK_DELAY_US": "20000"},
    )
    assert out.strip() == "11.0 0"


def test_external_event_waits_before_record_hold_no_core():
    # More waits-before-record than the device has cores: none of them holds
    # a core (Note [External event gates]), so other work still runs, and
    # every gate opens at its record or when its event is destroyed.
    cores = npu.get_device_properties(0).multi_processor_count
    s = npu.Stream()
    pending = [npu.ExternalEvent() for _ in range(cores + 2)]
    waiters = [npu.Stream() for _ in pending]
    for ev, w in zip(pending, waiters):
        ev.wait(w)
    assert torch_npu._C._npu_externalEventPendingGates(0) == len(pending)
    x = torch.ones(8, device="npu")
    s.wait_stream(npu.current_stream())  # x is written on the current stream
    with npu.stream(s):
        y = x + 1
    s.synchronize()  # unrelated work is not starved of cores
    assert y.sum().item() == 16
    assert not waiters[0].query()
    pending[0].record(s)
    waiters[0].synchronize()
    del ev
    del pending  # destroying an event opens its gate
    for w in waiters:
        w.synchronize()
    assert torch_npu._C._npu_externalEventPendingGates(0) == 0


def test_external_event_unsupported_methods():
    e = npu.ExternalEvent()
    for fn in (e.query, e.synchronize, e.recorded_time):
        with pytest.raises(RuntimeError, match="ExternalEvent does not support"):
            fn()


# --------------------------------------------------------------------------
# record_stream / erase_stream
# --------------------------------------------------------------------------


def test_record_stream_and_erase_stream():
    s = npu.Stream()
    with npu.stream(s):
        t = torch.ones(1024, device="npu")
    t.record_stream(npu.default_stream())
    torch_npu.erase_stream(t, npu.default_stream())
    t.record_stream(npu.Stream())
    del t
    npu.synchronize()


@pytest.mark.subprocess
def test_record_stream_delays_reuse():
    out = run_py_ok(
        """
        import torch, torch_npu
        npu = torch_npu.npu
        side = npu.Stream()
        x = torch.ones(1 << 14, device="npu"); npu.synchronize()
        with npu.stream(side):
            y = x * 2                      # slow reader of x on `side`
        x.record_stream(side)
        p = x.data_ptr(); del x
        z = torch.full((1 << 14,), 7.0, device="npu")   # may not take x's block before the reader ran
        side.synchronize(); npu.synchronize()
        print(y.min().item(), y.max().item())
        """,
        env={"NPU_SIM_TASK_DELAY_US": "30000"},
    )
    assert out.strip() == "2.0 2.0"


def test_elapsed_time_across_devices_is_refused():
    # Hardware has no common clock across devices; see NPUEvent::elapsed_time.
    a = torch.npu.Event(enable_timing=True)
    b = torch.npu.Event(enable_timing=True)
    with torch.npu.device(0):
        a.record()
    with torch.npu.device(1):
        b.record()
    with pytest.raises(RuntimeError, match="same device to calculate elapsed time, but got npu:0 and npu:1"):
        a.elapsed_time(b)
