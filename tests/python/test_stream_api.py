"""The Python stream API of torch_npu.npu (REFERENCE.md "Python API surface").

Covers: signatures and exports, id layout and priorities, reconstruction
through (stream_id, device_index, device_type) for every stream kind,
fail-fast on fake ids/devices/types, reprs/eq/hash, current/default/set_stream,
stream contexts (devices, nesting, threads), synchronize, stream limits,
npurt(), and a table of bad inputs to every public function.
"""

import ctypes
import inspect
import threading

import pytest
import torch

import torch_npu

npu = torch_npu.npu
NPU_TYPE = int(npu.default_stream().device_type)

SIGNATURES = {
    "Stream": "(device=None, priority=0, **kwargs)",
    "SyncLaunchStream": "(device=None, priority=0, **kwargs)",
    "ExternalStream": "(stream_ptr, device=None, **kwargs)",
    "Event": "(enable_timing=False, blocking=False, interprocess=False)",
    "ExternalEvent": "()",
    "StreamContext": "(stream_ctx)",
    "current_stream": "(device=None)",
    "default_stream": "(device=None)",
    "set_stream": "(stream)",
    "stream": "(stream)",
    "synchronize": "(device=None)",
    "current_device": "()",
    "set_device": "(device)",
    "device": "(device)",
    "device_of": "(obj)",
    "npurt": "()",
    "is_current_stream_capturing": "()",
    "set_stream_limit": "(stream, cube_num=-1, vector_num=-1)",
    "reset_stream_limit": "(stream)",
    "get_stream_limit": "(stream)",
}

METHODS = {
    ("Stream", "wait_event"): "(self, event)",
    ("Stream", "wait_stream"): "(self, stream)",
    ("Stream", "record_event"): "(self, event=None)",
    ("Stream", "query"): "(self)",
    ("Stream", "synchronize"): "(self)",
    ("Stream", "set_data_preprocess_stream"): "(self, is_data_preprocess_stream=False)",
    ("SyncLaunchStream", "wait_event"): "(self, event)",
    ("SyncLaunchStream", "record_event"): "(self, event=None)",
    ("Event", "from_ipc_handle"): "(device, handle)",
    ("Event", "record"): "(self, stream=None)",
    ("Event", "wait"): "(self, stream=None)",
    ("Event", "query"): "(self)",
    ("Event", "elapsed_time"): "(self, end_event)",
    ("Event", "synchronize"): "(self)",
    ("Event", "ipc_handle"): "(self)",
    ("Event", "recorded_time"): "(self)",
    ("ExternalEvent", "record"): "(self, stream=None)",
    ("ExternalEvent", "wait"): "(self, stream=None)",
    ("ExternalEvent", "reset"): "(self, stream=None)",
}


def _plain(sig):
    return str(sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                           return_annotation=sig.empty))


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_and_exports(name):
    obj = getattr(torch_npu.npu, name)
    assert str(inspect.signature(obj)) == SIGNATURES[name]
    assert getattr(torch.npu, name) is obj
    module = npu.streams if inspect.isclass(obj) and name != "StreamContext" and name != "device" else npu.utils
    if name in ("device", "device_of", "StreamContext"):
        module = npu.utils
    assert getattr(module, name) is obj


@pytest.mark.parametrize("cls,meth", sorted(METHODS))
def test_method_signatures(cls, meth):
    assert str(inspect.signature(getattr(getattr(npu, cls), meth))) == METHODS[(cls, meth)]


def test_erase_stream_signature():
    assert str(inspect.signature(torch_npu.erase_stream)) == "(tensor, stream)"
    assert list(inspect.signature(torch_npu.erase_stream).parameters) == ["tensor", "stream"]


def test_class_hierarchy():
    assert issubclass(npu.Stream, torch_npu._C._NPUStreamBase)
    assert issubclass(torch_npu._C._NPUStreamBase, torch.Stream)
    assert issubclass(npu.ExternalStream, npu.Stream)
    assert issubclass(npu.SyncLaunchStream, torch_npu._C._NPUStreamBase)
    assert not issubclass(npu.SyncLaunchStream, npu.Stream)
    assert issubclass(torch_npu._C._NPUEventBase, torch.Event)
    assert issubclass(npu.Event, torch_npu._C._NPUEventBase)
    assert issubclass(npu.ExternalEvent, torch_npu._C._NPUEventBase)


# --------------------------------------------------------------------------
# ids, priorities, kinds
# --------------------------------------------------------------------------


@pytest.mark.parametrize("priority,kind", [(0, 3), (1, 3), (-1, 4), (-2, 4)])
def test_priority_id_layout(priority, kind):
    assert (npu.Stream(priority=priority).stream_id >> 5) == kind


def test_default_stream_id_and_pools():
    assert npu.default_stream().stream_id == 0
    ids = {npu.Stream().stream_id for _ in range(64)}
    assert ids == set(range(96, 128))
    high = {npu.Stream(priority=-1).stream_id for _ in range(64)}
    assert high == set(range(128, 160))
    sync = {npu.SyncLaunchStream().stream_id for _ in range(8)}
    assert sync == set(range(64, 68))
    assert npu.Stream(is_sync_launch=True).stream_id in sync


def test_members_are_read_only():
    s = npu.Stream()
    for attr in ("stream_id", "device_index", "device_type"):
        with pytest.raises(AttributeError):
            setattr(s, attr, 1)
    assert s.device_type == NPU_TYPE and s.device == torch.device("npu", 0)


def test_priority_property_raises():
    with pytest.raises(RuntimeError, match=r"NPU dose not support Stream.get_priority\(\) currently."):
        npu.Stream().priority


def _every_kind():
    rt = npu.npurt()
    h = ctypes.c_void_p()
    assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
    return h.value, [
        ("default", npu.default_stream()),
        ("normal", npu.Stream()),
        ("high", npu.Stream(priority=-1)),
        ("sync_launch", npu.SyncLaunchStream()),
        ("external", npu.ExternalStream(h.value)),
    ]


def test_reconstruct_every_kind():
    ptr, kinds = _every_kind()
    try:
        for name, s in kinds:
            r = npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
            assert (r.stream_id, r.device_index, r.device_type) == (s.stream_id, s.device_index, s.device_type), name
            assert r.npu_stream == s.npu_stream, name
            if name != "external":
                r.synchronize()
            g = torch.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
            assert (g.stream_id, g.device_index, g.device_type) == (r.stream_id, r.device_index, r.device_type)
    finally:
        npu.synchronize()
        npu.npurt().npuStreamDestroy(ptr)


@pytest.mark.parametrize("triple,exc", [
    ((99999, 0, NPU_TYPE), RuntimeError),
    ((0, 999, NPU_TYPE), RuntimeError),
    ((0, 0, 999), RuntimeError),
    ((0, -1, NPU_TYPE), (RuntimeError, OverflowError)),
    ((-1, 0, NPU_TYPE), (RuntimeError, OverflowError)),
    ((0, 0, -1), (RuntimeError, OverflowError)),
    ((33, 0, NPU_TYPE), RuntimeError),
    ((5 << 5, 0, NPU_TYPE), RuntimeError),
    (((1 << 30) | 12345, 0, NPU_TYPE), RuntimeError),
    ((96, 0, 0), RuntimeError),
])
def test_fake_triples_fail_fast(triple, exc):
    sid, idx, typ = triple
    with pytest.raises(exc):
        npu.Stream(stream_id=sid, device_index=idx, device_type=typ)
    with pytest.raises(TypeError):  # duck-typed triples are not streams
        npu.set_stream(_FakeTriple(sid, idx, typ))


class _FakeTriple:
    def __init__(self, sid, idx, typ):
        self.stream_id, self.device_index, self.device_type = sid, idx, typ


def test_sync_launch_index_bounds():
    s = npu.SyncLaunchStream()
    with pytest.raises(RuntimeError, match="Invalid sync launch stream index"):
        npu.Stream(stream_id=s.stream_id + 4, device_index=s.device_index, device_type=s.device_type)


def test_validation_texts():
    with pytest.raises(RuntimeError, match="Unrecognized stream 33"):
        npu.Stream(stream_id=33, device_index=0, device_type=NPU_TYPE)
    with pytest.raises(RuntimeError, match="Invalid device_index: 999"):
        npu.Stream(stream_id=0, device_index=999, device_type=NPU_TYPE)
    with pytest.raises(RuntimeError, match="Unrecognized external NPU stream"):
        npu.Stream(stream_id=(1 << 30) | 4242, device_index=0, device_type=NPU_TYPE)


# --------------------------------------------------------------------------
# eq / hash / repr / ctypes
# --------------------------------------------------------------------------


def test_eq_hash_repr():
    s = npu.Stream()
    r = npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert s == r and hash(s) == hash(r) == hash((s.npu_stream, s.device))
    assert s != npu.default_stream()
    assert s != "stream" and not (s == 1) and s != None  # noqa: E711
    assert repr(s) == f"<torch_npu.npu.Stream device=npu:0 npu_stream={s.npu_stream:#x}>"
    assert s._as_parameter_.value == s.npu_stream
    sl = npu.SyncLaunchStream()
    assert repr(sl).startswith("<torch_npu.npu.SyncLaunchStream device=npu:0 npu_stream=0x")
    assert not (sl == npu.Stream(stream_id=sl.stream_id, device_index=0, device_type=NPU_TYPE))  # only its class
    assert len({s, r, npu.default_stream()}) == 2


def _counting_npu_stream_class():
    """A Stream subclass that counts reads of ``npu_stream`` (each one drains
    the task queue, Note [Task queue drain rule])."""

    class Counting(npu.Stream):
        reads = 0

        @property
        def npu_stream(self):
            type(self).reads += 1
            return npu.Stream.npu_stream.__get__(self)

    return Counting


def test_hash_and_repr_do_not_drain():
    # A dict lookup must not be a host synchronisation: hash and repr use the
    # handle's value without reading npu_stream (which drains the queue).
    Counting = _counting_npu_stream_class()
    s = Counting()
    x = torch.ones(1000, device="npu")
    s.wait_stream(npu.current_stream())  # x is produced on the default stream
    with npu.stream(s):
        for _ in range(5):
            x = x + 1  # queued work on s while we hash it
    table = {s: "s"}
    assert table[s] == "s" and s in {s}
    assert repr(s).startswith("<torch_npu.npu.Stream device=npu:0 npu_stream=0x")
    assert Counting.reads == 0
    # The documented definition still holds: the same value as npu_stream.
    assert hash(s) == hash((s.npu_stream, s.device))
    assert repr(s) == f"<torch_npu.npu.Stream device=npu:0 npu_stream={s.npu_stream:#x}>"
    assert s._raw_npu_stream == s.npu_stream
    s.synchronize()
    assert x[0].item() == 6


def test_priority_any_int_follows_torch_npus_rule():
    # <= -1 is HIGH, anything else NORMAL: also beyond 32 and 64 bits, where
    # the argument parser used to raise an OverflowError naming no argument.
    for priority, kind in ((-(2**40), 4), (-(2**70), 4), (2**40, 3), (2**70, 3), (-1, 4), (7, 3)):
        assert npu.Stream(priority=priority).stream_id >> 5 == kind, priority
    with pytest.raises(TypeError, match="Stream expects priority to be an int, but got float"):
        npu.Stream(priority=-1.0)


def test_huge_device_index_is_invalid_device_index():
    with pytest.raises(RuntimeError, match=r"Invalid device_index: 1180591620717411303424\."):
        npu.Stream(device=2**70)
    with pytest.raises(RuntimeError, match=r"Invalid device_index: 1180591620717411303424\."):
        npu.current_stream(2**70)
    with pytest.raises(RuntimeError, match=r"Invalid device_index: 99\."):
        npu.Stream(device="npu:99")


def test_stream_methods_reject_non_streams_and_non_events():
    s = npu.Stream()
    with pytest.raises(TypeError, match="wait_event expects a torch_npu.npu.Event, but got NoneType"):
        s.wait_event(None)
    with pytest.raises(TypeError, match="wait_event expects a torch_npu.npu.Event, but got Stream"):
        s.wait_event(npu.Stream())
    with pytest.raises(TypeError, match="record_event expects a torch_npu.npu.Event or None, but got str"):
        s.record_event("e")
    with pytest.raises(TypeError, match="wait_stream expects a torch_npu.npu.Stream, but got int"):
        s.wait_stream(1)
    with pytest.raises(TypeError, match="wait_stream expects a torch_npu.npu.Stream, but got Event"):
        s.wait_stream(npu.Event())
    # Generic npu objects keep working.
    g = torch.Stream(device="npu")
    s.wait_stream(g)
    e = torch.Event(device="npu")
    e.record(g)
    s.wait_event(e)
    assert s.record_event(torch.Event(device="npu")) is not None
    s.synchronize()


def test_rich_comparison_with_other_objects():
    s = npu.Stream()
    for other in (None, 1, "s", object(), npu.Event(), torch.device("npu:0"), (s.stream_id, 0, NPU_TYPE)):
        assert not (s == other) and s != other
        assert not (other == s) and other != s
        with pytest.raises(TypeError):
            s < other  # noqa: B015
    g = torch.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert s != g and g != s  # only Streams compare equal to a Stream (torch_npu's rule)
    sl = npu.SyncLaunchStream()
    r = npu.Stream(stream_id=sl.stream_id, device_index=sl.device_index, device_type=sl.device_type)
    assert sl != r and r != sl and not (sl == r)
    assert not (s != npu.Stream(stream_id=s.stream_id, device_index=0, device_type=NPU_TYPE))


def test_priority_range_raises():
    with pytest.raises(RuntimeError, match="priority_range"):
        npu.Stream.priority_range()


# --------------------------------------------------------------------------
# current / default / set_stream / contexts
# --------------------------------------------------------------------------


def test_current_and_default():
    for d in range(npu.device_count()):
        npu.set_device(d)
        assert npu.current_stream() == npu.default_stream()
        assert npu.current_stream().device_index == d
        assert type(npu.current_stream()) is npu.Stream
    npu.set_device(0)
    assert npu.current_stream(0) == npu.current_stream("npu:0") == npu.current_stream(torch.device("npu:0"))


def test_set_stream_switches_device():
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    s1 = npu.Stream(device=1)
    npu.set_stream(s1)
    assert npu.current_device() == 1 and npu.current_stream() == s1
    assert npu.current_stream(0) == npu.default_stream(0)
    npu.set_stream(None)
    assert npu.current_stream() == s1


def test_stream_context_restores_both_devices():
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    s0, s1 = npu.Stream(device=0), npu.Stream(device=1)
    npu.set_stream(s0)
    with npu.stream(s1) as entered:
        assert entered is s1
        assert npu.current_device() == 1 and npu.current_stream() == s1
        with npu.stream(s0):
            assert npu.current_device() == 0 and npu.current_stream() == s0
        assert npu.current_device() == 1
    assert npu.current_device() == 0 and npu.current_stream() == s0
    assert npu.current_stream(1) == npu.default_stream(1)


def test_stream_context_none_and_exceptions():
    with npu.stream(None) as s:
        assert s is None
    st = npu.Stream()
    with pytest.raises(KeyError):
        with npu.stream(st):
            raise KeyError("x")
    assert npu.current_stream() == npu.default_stream()
    assert isinstance(npu.stream(st), npu.StreamContext)


def test_ops_run_on_context_stream():
    s = npu.Stream()
    with npu.stream(s):
        x = torch.ones(100, device="npu") * 3
    s.synchronize()
    assert s.query() and x.sum().item() == 300


def test_threads_have_their_own_current_streams():
    streams = [npu.Stream() for _ in range(8)]
    shared = npu.Stream()
    barrier = threading.Barrier(len(streams))
    errors = []

    def work(i):
        try:
            assert npu.current_stream() == npu.default_stream()
            with npu.stream(streams[i]):
                barrier.wait()
                for _ in range(20):
                    assert npu.current_stream() == streams[i]
                    with npu.stream(shared):  # many threads enter one stream at once
                        assert npu.current_stream() == shared
                        y = torch.full((16,), float(i), device="npu") + 1
                    assert npu.current_stream() == streams[i]
                npu.current_stream().wait_stream(shared)  # y was produced on `shared`
                assert y[0].item() == i + 1
            assert npu.current_stream() == npu.default_stream()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_one_context_object_entered_by_two_threads():
    s = npu.Stream()
    ctx = npu.stream(s)
    inside = threading.Barrier(2)
    errors = []

    def work():
        try:
            with ctx:
                inside.wait()
                assert npu.current_stream() == s
                inside.wait()
            assert npu.current_stream() == npu.default_stream()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_stream_context_exit_without_enter_raises():
    # torch.cuda.StreamContext fails here with AttributeError on None; ours
    # says what was wrong, and leaves the current stream alone.
    s = npu.Stream()
    for ctx, name in ((npu.stream(s), "StreamContext"), (npu.StreamContext(s), "StreamContext"), (s, "Stream")):
        with pytest.raises(RuntimeError, match=rf"{name}\.__exit__ was called without a matching __enter__"):
            ctx.__exit__(None, None, None)
        assert npu.current_stream() == npu.default_stream()
    npu.stream(None).__exit__(None, None, None)  # the None context is a no-op throughout
    # One exit per enter: a second exit is the same error.
    ctx = npu.stream(s)
    with ctx:
        assert npu.current_stream() == s
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        ctx.__exit__(None, None, None)
    assert npu.current_stream() == npu.default_stream()


def test_stream_context_exit_on_another_thread_raises():
    s = npu.Stream()
    ctx = npu.stream(s)
    ctx.__enter__()
    errors = []

    def other():
        try:
            ctx.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "on this thread" in str(errors[0])
    assert npu.current_stream() == s  # the entering thread's entry is intact
    ctx.__exit__(None, None, None)
    assert npu.current_stream() == npu.default_stream()


@pytest.mark.parametrize("how", ["with_stream", "with_context"])
def test_one_stream_object_entered_by_two_threads_restores_each_threads_stream(how):
    # torch.Stream.__enter__ keeps the saved stream on the stream object: two
    # threads entering one stream restored each other's previous stream.
    s = npu.Stream()
    ctx = npu.stream(s)
    barrier = threading.Barrier(2)
    errors = []

    def work(i):
        try:
            mine = npu.Stream() if i else npu.default_stream()
            npu.set_stream(mine)
            barrier.wait()
            with (s if how == "with_stream" else ctx) as entered:
                assert entered is s
                barrier.wait()  # both inside
                assert npu.current_stream() == s
                barrier.wait()
            assert npu.current_stream() == mine, (i, npu.current_stream(), mine)
        except Exception as e:  # reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_with_stream_switches_device_and_nests():
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    s0, s1 = npu.Stream(device=0), npu.Stream(device=1)
    with s1 as entered:
        assert entered is s1 and npu.current_device() == 1 and npu.current_stream() == s1
        with s0:
            assert npu.current_device() == 0 and npu.current_stream() == s0
            with s1:  # re-entering the same object
                assert npu.current_stream() == s1
            assert npu.current_device() == 0 and npu.current_stream() == s0
        assert npu.current_device() == 1 and npu.current_stream() == s1
    assert npu.current_device() == 0 and npu.current_stream() == npu.default_stream()
    assert npu.current_stream(1) == npu.default_stream(1)


def test_generic_torch_stream_is_accepted():
    g = torch.Stream(device="npu")
    with npu.stream(g):
        assert npu.current_stream().stream_id == g.stream_id
    npu.set_stream(npu.default_stream())


# --------------------------------------------------------------------------
# synchronize, capturing, limits, npurt
# --------------------------------------------------------------------------


def test_synchronize_devices():
    npu.synchronize()
    npu.synchronize(0)
    npu.synchronize("npu:0")
    npu.synchronize(torch.device("npu", 0))
    for bad in ("cpu", torch.device("cpu")):
        with pytest.raises(ValueError, match="Expected a npu device, but got: cpu"):
            npu.synchronize(bad)


def test_is_current_stream_capturing():
    assert npu.is_current_stream_capturing() is False


def test_stream_limits():
    s = npu.Stream()
    cores = npu.get_device_properties(0).multi_processor_count
    assert npu.get_stream_limit(s) == {"cube_core_num": cores, "vector_core_num": cores}
    npu.set_stream_limit(s, cube_num=1)
    assert npu.get_stream_limit(s) == {"cube_core_num": 1, "vector_core_num": cores}
    assert torch_npu._C._npu_streamIntraOpThreads(s) == 1
    npu.set_stream_limit(s, vector_num=cores)
    assert npu.get_stream_limit(s)["vector_core_num"] == cores
    other = npu.Stream(stream_id=s.stream_id ^ 1, device_index=0, device_type=NPU_TYPE)
    assert npu.get_stream_limit(other)["cube_core_num"] == cores
    npu.reset_stream_limit(s)
    assert npu.get_stream_limit(s) == {"cube_core_num": cores, "vector_core_num": cores}
    assert torch_npu._C._npu_streamIntraOpThreads(s) == 0
    with pytest.raises(RuntimeError, match="Expected a core number"):
        npu.set_stream_limit(s, cube_num=0)
    with pytest.raises(RuntimeError, match="Expected a core number"):
        npu.set_stream_limit(s, vector_num=cores + 1)


def test_npurt_module():
    rt = npu.npurt()
    assert rt is torch_npu._C._npurt is npu.npurt()
    for name in ("npuHostRegister", "npuHostUnregister", "npuStreamCreate", "npuStreamDestroy"):
        assert hasattr(rt, name)
    assert rt.npuHostRegister(0, 4096, 0) != 0
    assert rt.npuHostUnregister(0) != 0
    assert rt.npuStreamCreate(0) != 0
    assert rt.npuStreamDestroy(0) != 0
    t = torch.ones(1024)
    assert rt.npuHostRegister(t.data_ptr(), 4096, 0x10000000) == 0  # ACL_HOST_REG_PINNED accepted
    assert rt.npuHostRegister(t.data_ptr(), 4096, 0) != 0           # already registered
    assert rt.npuHostUnregister(t.data_ptr()) == 0
    assert rt.npuHostRegister(t.data_ptr(), 0, 0) != 0
    assert rt.npuStreamDestroy(0xDEAD) != 0


def test_npurt_missing_message(monkeypatch):
    monkeypatch.delattr(torch_npu._C, "_npurt")
    with pytest.raises(RuntimeError, match=r"torch_npu._C._npurt is unavailable in this build."):
        npu.npurt()


# --------------------------------------------------------------------------
# Bad inputs to every public function (table-driven)
# --------------------------------------------------------------------------

BAD_INPUTS = [
    ("Stream(device='cpu')", lambda: npu.Stream(device="cpu"), ValueError),
    ("Stream(device=99)", lambda: npu.Stream(device=99), RuntimeError),
    ("Stream(device=1.5)", lambda: npu.Stream(device=1.5), TypeError),
    ("Stream(priority='x')", lambda: npu.Stream(priority="x"), TypeError),
    ("Stream(bogus=1)", lambda: npu.Stream(bogus=1), TypeError),
    ("Stream(stream_id='x')", lambda: npu.Stream(stream_id="x"), TypeError),
    ("SyncLaunchStream(device='cpu')", lambda: npu.SyncLaunchStream(device="cpu"), ValueError),
    ("ExternalStream(0)", lambda: npu.ExternalStream(0), ValueError),
    ("ExternalStream('x')", lambda: npu.ExternalStream("x"), TypeError),
    ("ExternalStream(garbage)", lambda: npu.ExternalStream(0x1234), RuntimeError),
    ("Event(enable_timing=True, interprocess=True)",
     lambda: npu.Event(enable_timing=True, interprocess=True), RuntimeError),
    ("Event(bogus=1)", lambda: npu.Event(bogus=1), TypeError),
    ("Event().record('s')", lambda: npu.Event().record("s"), TypeError),
    ("Event().wait(1)", lambda: npu.Event().wait(1), TypeError),
    ("Event().record(cpu stream)", lambda: npu.Event().record(torch.Stream(device="cpu")), RuntimeError),
    ("Event().elapsed_time(1)", lambda: npu.Event().elapsed_time(1), TypeError),
    ("Event.from_ipc_handle", lambda: npu.Event.from_ipc_handle(0, b""), RuntimeError),
    ("Event().ipc_handle()", lambda: npu.Event().ipc_handle(), RuntimeError),
    ("Event().reset(None)", lambda: npu.Event().reset(None), RuntimeError),
    ("ExternalEvent().record(1)", lambda: npu.ExternalEvent().record(1), TypeError),
    ("ExternalEvent().query()", lambda: npu.ExternalEvent().query(), RuntimeError),
    ("ExternalEvent(1)", lambda: npu.ExternalEvent(1), TypeError),
    ("Stream().wait_event(None)", lambda: npu.Stream().wait_event(None), TypeError),
    ("Stream().wait_stream(1)", lambda: npu.Stream().wait_stream(1), TypeError),
    ("Stream().wait_stream(cpu stream)", lambda: npu.Stream().wait_stream(torch.Stream(device="cpu")), RuntimeError),
    ("Stream().record_event('e')", lambda: npu.Stream().record_event("e"), TypeError),
    ("Stream(priority=1.5)", lambda: npu.Stream(priority=1.5), TypeError),
    ("Stream(priority=None)", lambda: npu.Stream(priority=None), TypeError),
    ("Stream(device=2**70)", lambda: npu.Stream(device=2**70), RuntimeError),
    ("Stream(device='npu:99')", lambda: npu.Stream(device="npu:99"), RuntimeError),
    ("device_of(1)", lambda: npu.device_of(1), TypeError),
    ("StreamContext(s).__exit__", lambda: npu.StreamContext(npu.Stream()).__exit__(None, None, None), RuntimeError),
    ("Stream().__exit__", lambda: npu.Stream().__exit__(None, None, None), RuntimeError),
    ("set_data_preprocess_stream(1)", lambda: npu.Stream().set_data_preprocess_stream(1), TypeError),
    ("current_stream('cpu')", lambda: npu.current_stream("cpu"), ValueError),
    ("current_stream(99)", lambda: npu.current_stream(99), RuntimeError),
    ("current_stream([])", lambda: npu.current_stream([]), TypeError),
    ("default_stream('cpu')", lambda: npu.default_stream("cpu"), ValueError),
    ("default_stream(99)", lambda: npu.default_stream(99), RuntimeError),
    ("set_stream(1)", lambda: npu.set_stream(1), TypeError),
    ("set_stream(cpu stream)", lambda: npu.set_stream(torch.Stream(device="cpu")), RuntimeError),
    ("stream('s').__enter__", lambda: npu.stream("s").__enter__(), TypeError),
    ("StreamContext(1).__enter__", lambda: npu.StreamContext(1).__enter__(), TypeError),
    ("synchronize('cpu')", lambda: npu.synchronize("cpu"), ValueError),
    ("synchronize(99)", lambda: npu.synchronize(99), RuntimeError),
    ("synchronize(1.5)", lambda: npu.synchronize(1.5), TypeError),
    ("set_device('cpu')", lambda: npu.set_device("cpu"), ValueError),
    ("set_device(99)", lambda: npu.set_device(99), RuntimeError),
    ("set_stream_limit(None)", lambda: npu.set_stream_limit(None), TypeError),
    ("set_stream_limit('s')", lambda: npu.set_stream_limit("s", 1), TypeError),
    ("set_stream_limit(s, 'x')", lambda: npu.set_stream_limit(npu.Stream(), "x"), TypeError),
    ("set_stream_limit(s, -5)", lambda: npu.set_stream_limit(npu.Stream(), -5), RuntimeError),
    ("get_stream_limit(None)", lambda: npu.get_stream_limit(None), TypeError),
    ("reset_stream_limit(1)", lambda: npu.reset_stream_limit(1), TypeError),
    ("npurt().npuStreamCreate(-1)", lambda: npu.npurt().npuStreamCreate(-1), TypeError),
    ("npurt().npuHostRegister('x', 1, 0)", lambda: npu.npurt().npuHostRegister("x", 1, 0), TypeError),
    ("erase_stream(1, s)", lambda: torch_npu.erase_stream(1, npu.Stream()), TypeError),
    ("erase_stream(t, 1)", lambda: torch_npu.erase_stream(torch.ones(1, device="npu"), 1), TypeError),
    ("erase_stream(cpu t, s)", lambda: torch_npu.erase_stream(torch.ones(1), npu.Stream()), RuntimeError),
    ("set_external_stream_mode('x')", lambda: npu.set_external_stream_mode("x"), ValueError),
    ("graph_task_group_begin(s)", lambda: npu.graph_task_group_begin(npu.Stream()), RuntimeError),
    ("graph_task_group_begin(1)", lambda: npu.graph_task_group_begin(1), TypeError),
    ("NPUGraph().capture_begin()", lambda: npu.NPUGraph().capture_begin(), RuntimeError),
    ("launch_callback(1)", lambda: npu.launch_callback(1), TypeError),
]


@pytest.mark.parametrize("name,fn,exc", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs(name, fn, exc):
    with pytest.raises(exc):
        fn()
    # the process and the streams stay consistent
    assert npu.current_stream() == npu.default_stream()
    assert (torch.ones(3, device="npu") + 1).sum().item() == 6


@pytest.mark.skipif(torch.get_num_threads() < 2, reason="needs at least 2 intra-op threads to observe a cap")
def test_stream_limit_caps_kernel_parallelism():
    s = torch_npu.npu.Stream()
    triple = (s.stream_id, s.device_index, s.device_type)
    unlimited = torch_npu._C._testing_kernel_threads(*triple)
    assert unlimited == torch.get_num_threads()
    torch_npu.npu.set_stream_limit(s, 1, 1)
    assert torch_npu._C._testing_kernel_threads(*triple) == 1
    # Other streams are not affected, and the executor thread is restored.
    other = torch_npu.npu.Stream()
    assert torch_npu._C._testing_kernel_threads(other.stream_id, other.device_index, other.device_type) == unlimited
    torch_npu.npu.reset_stream_limit(s)
    assert torch_npu._C._testing_kernel_threads(*triple) == unlimited
