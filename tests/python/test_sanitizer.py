"""The NPU stream sanitizer (torch_npu.npu._sanitizer, _stream_check) and the
trace hooks under it (torch_npu.npu._gpu_trace, torch_npu.utils._npu_trace).

The checks are deterministic: the sanitizer reasons about the order in which
the host queued work and synchronized, never about timing, so no test here
depends on how fast a stream runs. In-process tests enable the sanitizer for
one test (the ``sanitizer`` fixture) and disable it after; the environment
variable, stream creation and the fresh-process paths run in subprocesses.
"""

from __future__ import annotations

import gc
import threading
from typing import Callable, Dict, Iterator, List, Tuple

import pytest
import torch
import torch.cuda._sanitizer as csan
import torch_npu
import torch_npu.npu._sanitizer as san
from torch_npu.npu import _gpu_trace
from torch_npu.npu._stream_check import MissingRecordStreamError, NPURecordStreamHandler
from torch_npu.utils import _npu_trace

from conftest import run_py

npu = torch_npu.npu


def raw(stream: torch.Stream) -> int:
    """The handle the hooks report for ``stream`` (Stream.npu_stream without the drain)."""
    return npu.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                      device_type=stream.device_type)._raw_npu_stream


@pytest.fixture
def sanitizer() -> Iterator[NPURecordStreamHandler]:
    """The sanitizer, enabled for the test; yields its event handler."""
    assert not san.npu_sanitizer.enabled
    san.enable_npu_sanitizer()
    try:
        yield san.npu_sanitizer.event_handler
    finally:
        san.npu_sanitizer.disable()
    assert not torch_npu._C._npu_isTraceActive()


# -- data races (CSAN's check) ----------------------------------------------


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_missing_wait_stream_is_a_race_naming_both_ops_streams_and_stacks(sanitizer):
    x = torch.ones(64, device="npu") * 3  # written on the default stream
    side = npu.Stream()
    with npu.stream(side):
        with pytest.raises(csan.CUDASanitizerErrors) as info:
            x.add(1)  # reads x on `side`, which never waited for the default stream
    (error,) = info.value.errors
    assert isinstance(error, csan.UnsynchronizedAccessError)
    assert error.data_ptr == x.data_ptr()
    assert error.current_access.stream == raw(side)
    assert error.current_access.type is csan.AccessType.READ
    assert "aten::add.Tensor" in error.current_access.operator
    assert error.previous_access.stream == raw(npu.default_stream())
    assert error.previous_access.type is csan.AccessType.WRITE
    assert "aten::mul.Tensor" in error.previous_access.operator
    text = str(error)
    assert "x.add(1)" in text and "torch.ones(64" in text  # each access's stack, and the allocation's
    assert str(raw(side)) in text and str(raw(npu.default_stream())) in text


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_write_after_unsynchronized_read_on_another_stream_is_a_race(sanitizer):
    x = torch.zeros(16, device="npu")
    side = npu.Stream()
    side.wait_stream(npu.current_stream())
    with npu.stream(side):
        y = x * 2  # a read of x on `side`
    with pytest.raises(csan.CUDASanitizerErrors) as info:
        x.fill_(1.0)  # the default stream overwrites x while `side` may still read it
    (error,) = info.value.errors
    assert error.current_access.type is csan.AccessType.WRITE
    assert error.previous_access.type is csan.AccessType.READ
    assert error.previous_access.stream == raw(side)
    del y


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_host_read_of_a_side_stream_result_without_wait_is_a_race(sanitizer):
    side = npu.Stream()
    with npu.stream(side):
        y = torch.full((4,), 2.0, device="npu")
    with pytest.raises(csan.CUDASanitizerErrors):
        y.sum()  # on the default stream, which did not wait for `side`


def _wait_stream(side: npu.Stream) -> None:
    side.wait_stream(npu.current_stream())


def _wait_event(side: npu.Stream) -> None:
    side.wait_event(npu.current_stream().record_event())


def _torch_event(side: npu.Stream) -> None:
    event = torch.Event(device="npu")  # through the generic guard (NPUGuardImpl)
    event.record(npu.current_stream())
    side.wait_event(event)


def _device_synchronize(side: npu.Stream) -> None:
    npu.synchronize()


def _stream_synchronize(side: npu.Stream) -> None:
    npu.current_stream().synchronize()


def _event_synchronize(side: npu.Stream) -> None:
    npu.current_stream().record_event().synchronize()


ORDERINGS: Dict[str, Callable[[npu.Stream], None]] = {
    "wait_stream": _wait_stream,
    "wait_event": _wait_event,
    "torch.Event": _torch_event,
    "device synchronize": _device_synchronize,
    "stream synchronize": _stream_synchronize,
    "event synchronize": _event_synchronize,
}


@pytest.mark.parametrize("order", list(ORDERINGS), ids=list(ORDERINGS))
def test_ordered_cross_stream_use_is_quiet(sanitizer, order):
    x = torch.ones(64, device="npu") * 3
    side = npu.Stream()
    ORDERINGS[order](side)  # side is now ordered after x's write
    with npu.stream(side):
        y = x + 1
        x.record_stream(side)
    npu.current_stream().wait_stream(side)
    assert y.sum().item() == 256.0
    del x, y
    gc.collect()
    assert sanitizer.record_stream_errors == []
    assert sanitizer.flush_record_stream_warnings() == []


def test_round_trip_between_streams_is_quiet(sanitizer):
    default = npu.current_stream()
    side = npu.Stream()
    a = torch.randn(32, 32, device="npu")
    side.wait_stream(default)
    with npu.stream(side):
        b = a @ a
        a.record_stream(side)
    default.wait_stream(side)
    c = (b + a).relu()
    assert c.shape == (32, 32)
    c.cpu()  # a host read: the default stream's synchronize


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_disable_stops_checking():
    san.enable_npu_sanitizer()
    san.npu_sanitizer.disable()
    assert not torch_npu._C._npu_isTraceActive()
    x = torch.ones(8, device="npu") * 2
    side = npu.Stream()
    with npu.stream(side):
        x.add(1)  # racy, but unchecked now
    npu.synchronize()


# -- missing record_stream (torch_npu's check) ------------------------------


def test_missing_record_stream_is_reported_when_the_tensor_is_freed(sanitizer, capsys):
    x = torch.ones(256, device="npu")
    ptr = x.untyped_storage().data_ptr()
    side = npu.Stream()
    side.wait_stream(npu.current_stream())  # no race: side waits for x's write
    with npu.stream(side):
        y = x * 2  # but nothing tells the allocator x is used on side
    # On an Ascend device the default stream may now reuse x's memory: the
    # free, and the check, happen here, whether or not the task ran (Note
    # [Tasks on other streams record their use]).
    del x
    (error,) = sanitizer.record_stream_errors
    assert isinstance(error, MissingRecordStreamError)
    assert isinstance(error, csan.SynchronizationError)
    assert error.data_ptr == ptr
    assert error.allocation_stream == raw(npu.default_stream())
    assert error.usage_stream == raw(side)
    assert "aten::mul.Tensor" in error.usage.operator
    assert "y = x * 2" in str(error) and "torch.ones(256" in str(error)
    assert "missing record_stream" in capsys.readouterr().err
    npu.current_stream().wait_stream(side)
    del y


def test_missing_record_stream_is_found_by_flush_while_the_tensor_lives(sanitizer, gate):
    x = torch.ones(256, device="npu")
    side = npu.Stream()
    side.wait_stream(npu.current_stream())
    with npu.stream(side):
        g = gate(side)  # side cannot run its work yet
        x.neg()
    (error,) = sanitizer.flush_record_stream_warnings()
    assert error.usage_stream == raw(side)
    assert sanitizer.record_stream_errors == [error]
    g.release()
    npu.current_stream().wait_stream(side)  # now the default stream is ordered after the use
    assert sanitizer.flush_record_stream_warnings() == []
    del x


def test_missing_record_stream_is_reported_per_stream(sanitizer):
    x = torch.ones(16, device="npu")
    s1, s2 = npu.Stream(), npu.Stream(priority=-1)  # two distinct streams
    for s in (s1, s2):
        s.wait_stream(npu.current_stream())
        with npu.stream(s):
            x.neg()
    errors = sanitizer.flush_record_stream_warnings()
    assert sorted(e.usage_stream for e in errors) == sorted([raw(s1), raw(s2)])
    npu.synchronize()


def test_erase_stream_undoes_record_stream(sanitizer):
    x = torch.ones(16, device="npu")
    side = npu.Stream()
    side.wait_stream(npu.current_stream())
    with npu.stream(side):
        x.neg()
    x.record_stream(side)
    assert sanitizer.flush_record_stream_warnings() == []
    torch_npu.erase_stream(x, side)
    (error,) = sanitizer.flush_record_stream_warnings()
    assert error.usage_stream == raw(side)
    npu.synchronize()


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_record_stream_does_not_hide_a_race(sanitizer):
    x = torch.ones(16, device="npu") + 1
    side = npu.Stream()
    x.record_stream(side)
    with npu.stream(side):
        with pytest.raises(csan.CUDASanitizerErrors):
            x.neg()


def test_same_stream_use_needs_no_record_stream(sanitizer):
    x = torch.ones(16, device="npu")
    y = (x + 1).sum()
    del x
    gc.collect()
    assert y.item() == 32.0
    assert sanitizer.record_stream_errors == []


def test_graph_capture_and_replay_stay_quiet(sanitizer):
    x = torch.arange(6, dtype=torch.float32, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        w = ((x * 2 + 1) ** 2).sum()
    g.replay()  # on the default stream, after x's write, before w's read: ordered
    assert w.item() == pytest.approx((((torch.arange(6.0)) * 2 + 1) ** 2).sum().item())
    side = npu.Stream()
    side.wait_stream(npu.current_stream())
    with npu.stream(side):
        g.replay()
    npu.current_stream().wait_stream(side)
    assert w.item() > 0
    assert sanitizer.flush_record_stream_warnings() == []  # graph pool memory needs none


@pytest.mark.racy(reason="races on purpose: the stream sanitizer must report it")
def test_graph_replay_is_checked_as_one_launch_on_the_replay_stream(sanitizer):
    x = torch.ones(6, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        w = (x * 2).sum()
    x.fill_(3.0)  # the default stream writes the graph's input ...
    side = npu.Stream()
    with npu.stream(side):
        with pytest.raises(csan.CUDASanitizerErrors) as info:
            g.replay()  # ... and side replays without waiting for it
    (error,) = info.value.errors
    assert error.data_ptr == x.data_ptr()
    assert error.current_access.stream == raw(side)
    assert error.current_access.operator == (
        "NPUGraph.replay() of 2 captured ops: aten::mul.Tensor, aten::sum")
    assert "aten::fill_" in error.previous_access.operator
    npu.current_stream().wait_stream(side)
    g.replay()  # on the default stream, which now waited for side's replay: quiet
    assert w.item() == 36.0


def test_argument_handler_reads_writes_and_factories():
    from torch_npu.npu._stream_check import NPUArgumentHandler

    a = torch.ones(5, 3, device="npu")
    b = torch.ones(6, 3, device="npu")[1:]  # a view with an offset
    h = NPUArgumentHandler()
    add = torch.ops.aten.add.Tensor
    h.parse_inputs(add._schema, (a, b), {}, is_factory=False)
    c = torch.add(a, b)
    h.parse_outputs(add._schema, c, is_factory=False)
    assert h.dataptrs_read == {a.data_ptr(), b.data_ptr()}
    assert h.dataptrs_written == {c.data_ptr()}
    assert h.storage_dataptrs_accessed == {a.data_ptr(), b.untyped_storage().data_ptr(), c.data_ptr()}

    h = NPUArgumentHandler()
    empty_like = torch.ops.aten.empty_like.default
    h.parse_inputs(empty_like._schema, (a,), {}, is_factory=True)
    out = torch.empty_like(a)
    h.parse_outputs(empty_like._schema, out, is_factory=True)
    assert h.dataptrs_read == set()  # only a's metadata
    assert h.dataptrs_written == {out.data_ptr()}  # fresh memory the op produced

    h = NPUArgumentHandler()
    h.parse_inputs(add._schema, (torch.ones(2), torch.ones(2)), {}, is_factory=False)
    assert h.dataptrs_read == set() and h.device_index is None  # cpu tensors are not ours


def test_kernel_check_is_off_without_its_path(monkeypatch):
    monkeypatch.delenv("ASCEND_OPP_DEBUG_PATH", raising=False)
    assert san.npu_sanitizer.enable_kernel_check() is False


# -- the hooks --------------------------------------------------------------


@pytest.fixture
def hooks() -> Iterator[List[Tuple[str, tuple]]]:
    """Every hook call while the trace is active, as (registry name, args)."""
    calls: List[Tuple[str, tuple]] = []
    names = [n for n in _gpu_trace.__all__ if n.endswith("Callbacks")]
    callbacks = []
    for name in names:
        def cb(*args, _name=name):
            calls.append((_name, args))
        getattr(_gpu_trace, name).add_callback(cb)
        callbacks.append((name, cb))
    torch_npu._C._activate_npu_trace(0)
    try:
        yield calls
    finally:
        torch_npu._C._npu_deactivateTrace()
        for name, cb in callbacks:
            getattr(_gpu_trace, name).remove_callback(cb)


def _kinds(calls: List[Tuple[str, tuple]]) -> List[str]:
    return [name for name, _ in calls]


def test_hooks_are_off_unless_activated():
    calls = []
    _gpu_trace.MemoryAllocationCallbacks.add_callback(calls.append)
    try:
        assert not torch_npu._C._npu_isTraceActive()
        torch._C._activate_gpu_trace()  # PyTorch's trace alone does not turn them on
        torch.ones(4, device="npu").sum().item()
        assert calls == []
    finally:
        _gpu_trace.MemoryAllocationCallbacks.remove_callback(calls.append)


def test_memory_hooks_report_storage_pointers(hooks):
    x = torch.empty(1000, device="npu")
    ptr = x.untyped_storage().data_ptr()
    assert ("MemoryAllocationCallbacks", (ptr,)) in hooks
    del x
    assert hooks[-1] == ("MemoryDeallocationCallbacks", (ptr,))
    torch.empty(0, device="npu")  # no block, no hook
    assert [k for k in _kinds(hooks) if k.startswith("Memory")] == [
        "MemoryAllocationCallbacks", "MemoryDeallocationCallbacks"]


def test_event_hooks_of_npu_events(hooks):
    side = npu.Stream()
    event = npu.Event()
    event.record()  # created at its first record
    side.wait_event(event)
    event.synchronize()
    handle = event.npu_event
    del event
    assert [(k, a) for k, a in hooks if k.startswith("Event")] == [
        ("EventCreationCallbacks", (handle,)),
        ("EventRecordCallbacks", (handle, raw(npu.current_stream()))),
        ("EventWaitCallbacks", (handle, raw(side))),
        ("EventSynchronizationCallbacks", (handle,)),
        ("EventDeletionCallbacks", (handle,)),
    ]


def test_event_hooks_of_torch_events(hooks):
    side = npu.Stream()
    event = torch.Event(device="npu")
    event.record(npu.current_stream())
    event.wait(side)
    event.synchronize()
    del event
    events = [(k, a) for k, a in hooks if k.startswith("Event")]
    assert _kinds(events) == ["EventCreationCallbacks", "EventRecordCallbacks", "EventWaitCallbacks",
                              "EventSynchronizationCallbacks", "EventDeletionCallbacks"]
    assert len({args[0] for _, args in events}) == 1  # one event throughout
    assert events[2][1][1] == raw(side)


def test_synchronization_hooks(hooks):
    side = npu.Stream()
    side.synchronize()
    npu.synchronize()
    torch.ones(2, device="npu").cpu()  # a host read synchronizes the current stream
    kinds = [(k, a) for k, a in hooks if k.endswith("SynchronizationCallbacks")]
    assert kinds == [
        ("StreamSynchronizationCallbacks", (raw(side),)),
        ("DeviceSynchronizationCallbacks", ()),
        ("StreamSynchronizationCallbacks", (raw(npu.current_stream()),)),
    ]


def test_record_and_erase_stream_hooks(hooks):
    x = torch.ones(4, device="npu")
    ptr = x.untyped_storage().data_ptr()
    side = npu.Stream()
    x[1:].record_stream(side)  # a view: the hook names its storage
    x.record_stream(torch.Stream(stream_id=side.stream_id, device_index=side.device_index,
                                 device_type=side.device_type))  # the generic path
    torch_npu.erase_stream(x, side)
    uses = [(k, a) for k, a in hooks if k in ("RecordStreamCallbacks", "EraseStreamCallbacks")]
    assert uses == [
        ("RecordStreamCallbacks", (ptr, raw(side))),
        ("RecordStreamCallbacks", (ptr, raw(side))),
        ("EraseStreamCallbacks", (ptr, raw(side))),
    ]


def test_hook_under_an_events_mutex_does_not_block_a_reader_of_the_event(hooks):
    # Event.record runs the hook (which takes the GIL) under the event object's
    # mutex; a reader of the same event that waited for that mutex while holding
    # the GIL would deadlock with it. The hook waits until the reader is blocked.
    event = npu.Event()
    in_hook, reader_started, read = threading.Event(), threading.Event(), []

    def on_record(ev, stream):
        if not in_hook.is_set():
            in_hook.set()
            assert reader_started.wait(timeout=60)

    def reader():
        in_hook.wait(timeout=60)
        reader_started.set()
        read.append(event.npu_event)  # waits for the mutex that record holds

    _gpu_trace.EventRecordCallbacks.add_callback(on_record)
    try:
        t = threading.Thread(target=reader)
        t.start()
        event.record()
        t.join(timeout=60)
    finally:
        _gpu_trace.EventRecordCallbacks.remove_callback(on_record)
    assert read == [event.npu_event] and read[0] != 0


def test_stream_creation_hooks_in_a_fresh_process():
    out = run_py(
        """
        import torch, torch_npu
        from torch_npu.npu import _gpu_trace
        created = []
        _gpu_trace.register_callback_for_stream_creation(created.append)
        torch_npu._C._activate_npu_trace(0)
        default = torch_npu.npu.default_stream()._raw_npu_stream
        side = torch_npu.npu.Stream()._raw_npu_stream
        assert default in created and side in created, (default, side, created)
        # default + secondary, then both priority pools
        print(len(created))
        """
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == 2 + 2 * 32


def test_torch_npu_trace_names_share_the_registries():
    assert _npu_trace.NPUEventRecordCallbacks is _gpu_trace.EventRecordCallbacks
    calls = []
    _npu_trace.register_callback_for_npu_record_stream(lambda p, s: calls.append(p), "test")
    _gpu_trace.RecordStreamCallbacks.fire_callbacks(7, 8)
    _gpu_trace.RecordStreamCallbacks.callback_list.pop()
    assert calls == [7]
    with pytest.raises(RuntimeError, match="kernel check .* not available on the simulated NPU"):
        _npu_trace.register_callback_for_acl_start_execution(print, "start")


def test_bad_activation_modes():
    with pytest.raises(RuntimeError, match="kernel check mode .* not available"):
        torch_npu._C._activate_npu_trace(1)
    with pytest.raises(ValueError, match="expected mode 0 .* but got 7"):
        torch_npu._C._activate_npu_trace(7)
    assert not torch_npu._C._npu_isTraceActive()


def test_kernel_check_path_is_refused(monkeypatch):
    monkeypatch.setenv("ASCEND_OPP_DEBUG_PATH", "/tmp/opp")
    with pytest.raises(RuntimeError, match="ASCEND_OPP_DEBUG_PATH .* Unset"):
        san.enable_npu_sanitizer()
    assert not san.npu_sanitizer.enabled and not torch_npu._C._npu_isTraceActive()


# -- TORCH_NPU_SANITIZER at import -------------------------------------------

RACY = """
import torch, torch_npu
x = torch.ones(8, device="npu") * 2
side = torch_npu.npu.Stream()
with torch_npu.npu.stream(side):
    y = x + 1
print("unchecked")
"""

CORRECT = """
import torch, torch_npu
import torch_npu.npu._sanitizer as san
assert san.npu_sanitizer.enabled
x = torch.ones(8, device="npu") * 2
side = torch_npu.npu.Stream()
side.wait_stream(torch_npu.npu.current_stream())
with torch_npu.npu.stream(side):
    y = x + 1
    x.record_stream(side)
torch_npu.npu.current_stream().wait_stream(side)
print(y.sum().item())
del x
assert san.npu_sanitizer.event_handler.record_stream_errors == []
"""


def test_env_var_enables_the_sanitizer_at_import():
    p = run_py(RACY, env={"TORCH_NPU_SANITIZER": "1"})
    assert p.returncode != 0 and "unchecked" not in p.stdout
    assert "CUDASanitizerErrors: detected 1 errors" in p.stderr
    assert "CSAN detected a possible data race" in p.stderr
    p = run_py(CORRECT, env={"TORCH_NPU_SANITIZER": "1"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "24.0"
    assert "trace hook" not in p.stderr  # no hook failed, at exit either


@pytest.mark.parametrize("value", ["0", ""])
def test_env_var_off(value):
    p = run_py(RACY, env={"TORCH_NPU_SANITIZER": value})
    assert p.returncode == 0 and "unchecked" in p.stdout, p.stderr


def test_env_var_bad_value():
    p = run_py("import torch_npu", env={"TORCH_NPU_SANITIZER": "yes"})
    assert p.returncode != 0
    assert "ValueError: TORCH_NPU_SANITIZER should be 0 or 1, but got 'yes'" in p.stderr
