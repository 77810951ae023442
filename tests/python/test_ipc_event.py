"""Inter-process events (Note [Inter-process events] in csrc/core/NPUIpcEvent.h):
torch.npu.Event(interprocess=True), ipc_handle(), Event.from_ipc_handle and events sent
through torch.multiprocessing.

Waiting is proved with stream gates and queues between the processes: a process reports
what it sees while the other holds its work back, never after a sleep.
"""
import ctypes
import os

import pytest
import torch
import torch.multiprocessing as mp
import torch_npu

from conftest import load_npurt

npu = torch_npu.npu


def _context():
    return mp.get_context("spawn")


def _child_waits(queue_in, queue_out):
    # Gets the parent's event, reports whether its latest record completed, then waits for it
    # on a stream and on the host.
    event = queue_in.get()
    queue_out.put(("device", event.device.type, event.device.index, event.query()))
    stream = npu.Stream()
    x = torch.zeros(4, device="npu")
    stream.wait_stream(npu.current_stream())
    event.wait(stream)
    with npu.stream(stream):
        x.fill_(1.0)
    after = npu.Event()
    after.record(stream)
    queue_out.put(("stream waits", after.query()))
    assert queue_in.get() == "released"
    event.synchronize()
    stream.synchronize()
    queue_out.put(("done", event.query(), x.cpu().tolist()))


@pytest.mark.subprocess  # a spawned process
def test_another_process_waits_for_the_record_on_its_stream_and_host(gate):
    ctx = _context()
    to_child, from_child = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_child_waits, args=(to_child, from_child))
    child.start()
    try:
        stream = npu.Stream()
        event = npu.Event(interprocess=True)
        with gate(stream) as held:
            event.record(stream)  # behind the gate: not complete until it opens
            to_child.put(event)
            assert from_child.get(timeout=120) == ("device", "npu", 0, False)
            assert from_child.get(timeout=120) == ("stream waits", False)
            held.release()
        to_child.put("released")
        assert from_child.get(timeout=120) == ("done", True, [1.0] * 4)
    finally:
        child.join(timeout=120)
    assert child.exitcode == 0


def _child_records(handle, queue_in, queue_out):
    event = npu.Event.from_ipc_handle(0, handle)
    stream = npu.Stream()
    with npu.stream(stream):
        event.record()
    queue_out.put("recorded")
    assert queue_in.get() == "bye"


@pytest.mark.subprocess  # a spawned process
def test_a_record_made_by_another_process_is_what_the_owner_waits_for():
    ctx = _context()
    event = npu.Event(interprocess=True)
    assert event.query()  # never recorded
    to_child, from_child = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_child_records, args=(event.ipc_handle(), to_child, from_child))
    child.start()
    try:
        assert from_child.get(timeout=120) == "recorded"
        event.synchronize()  # the child's record, on the child's stream
        assert event.query()
        to_child.put("bye")
    finally:
        child.join(timeout=120)
    assert child.exitcode == 0


def _child_records_then_dies(handle, queue_out):
    event = npu.Event.from_ipc_handle(0, handle)
    stream = npu.Stream()
    rt = load_npurt()
    # Every task of the stream takes 10 s (the most): the record cannot complete before the exit.
    assert rt.npuStreamSetTaskDelay(ctypes.c_void_p(stream.npu_stream), 10_000_000) == 0
    event.record(stream)
    queue_out.put(os.getpid())
    queue_out.close()
    queue_out.join_thread()  # the pid is written before the process ends
    os._exit(0)  # nothing waits for the stream


@pytest.mark.subprocess  # a spawned process
def test_waits_on_a_record_whose_process_died_fail_instead_of_hanging():
    ctx = _context()
    event = npu.Event(interprocess=True)
    from_child = ctx.Queue()
    child = ctx.Process(target=_child_records_then_dies, args=(event.ipc_handle(), from_child))
    child.start()
    pid = from_child.get(timeout=120)
    child.join(timeout=120)  # gone before its record completed
    assert not event.query()
    with pytest.raises(RuntimeError, match=f"pid {pid}\\) exited before the work it recorded"):
        event.synchronize()
    stream = npu.Stream()
    event.wait(stream)
    with npu.stream(stream):
        y = torch.ones(2, device="npu") * 3
    with pytest.raises(RuntimeError, match="Event.wait: the process that recorded"):
        stream.synchronize()  # the error reaches the stream that waited, once
    stream.synchronize()
    assert npu.current_stream().query()
    del y


def test_an_event_opened_in_its_own_process_shares_its_records():
    first = npu.Event(interprocess=True)
    second = npu.Event.from_ipc_handle(torch.device("npu:0"), first.ipc_handle())
    assert second.device == torch.device("npu:0")
    stream = npu.Stream()
    second.record(stream)
    first.synchronize()
    assert first.query() and second.query()
    with pytest.raises(RuntimeError, match="opened from a handle"):
        second.ipc_handle()


def test_bad_uses_are_refused_with_reasons():
    with pytest.raises(RuntimeError, match="needs enable_timing=False"):
        npu.Event(enable_timing=True, interprocess=True)
    with pytest.raises(RuntimeError, match="needs an event created with interprocess=True"):
        npu.Event().ipc_handle()
    with pytest.raises(RuntimeError, match="64-byte handle"):
        npu.Event.from_ipc_handle(0, b"short")
    with pytest.raises(RuntimeError, match="not an event handle"):
        npu.Event.from_ipc_handle(0, bytes(64))
    with pytest.raises(TypeError, match="handle must be bytes"):
        npu.Event.from_ipc_handle(0, "text")
    event = npu.Event(interprocess=True)
    with pytest.raises(RuntimeError, match="measures no time"):
        event.elapsed_time(event)
    other_device = npu.Stream(device=1)
    with pytest.raises(RuntimeError, match="does not match recording stream's device 1"):
        event.record(other_device)
    handle = event.ipc_handle()
    del event  # the owner destroyed it: the handle names nothing now
    with pytest.raises(RuntimeError, match="destroyed the event|no longer exists"):
        npu.Event.from_ipc_handle(0, handle)
    with pytest.raises(RuntimeError, match="needs an event created with interprocess=True"):
        _context().SimpleQueue().put(npu.Event())


def test_a_capture_refuses_interprocess_events():
    event = npu.Event(interprocess=True)
    g = npu.NPUGraph()
    with npu.graph(g):
        with pytest.raises(RuntimeError, match="cannot be recorded or waited on by a stream that "
                                               "is capturing"):
            event.record()
        with pytest.raises(RuntimeError, match="cannot be recorded or waited on"):
            event.wait()
        x = torch.ones(1, device="npu") * 2
    g.replay()
    assert x.cpu().tolist() == [2.0] and event.query()
