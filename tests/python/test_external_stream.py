"""torch_npu.npu.ExternalStream in compat mode (default) and full mode.

Covers: the scenarios of torch_npu's own external-stream tests (creation, as
current, ops, same pointer, isinstance, synchronize/query restrictions, the
PER_STREAM_QUEUE restriction, drain of the default queue); every refusal of
REFERENCE.md "External streams: what torch_npu refuses"; the checks this
project adds (0, mixed arguments, garbage/destroyed handles, device
agreement, registry lifetime); and full mode, where synchronize, query,
events, wait_stream and record_stream work with the ordering a managed stream
has (proved with NPU_SIM_TASK_DELAY_US in subprocesses, also with
PER_STREAM_QUEUE=1).
"""

import contextlib
import ctypes
import re
import subprocess
import sys
import threading

import pytest
import torch

import torch_npu
from conftest import PKG_ROOT, run_py_ok

npu = torch_npu.npu


@contextlib.contextmanager
def raw_stream(device=None):
    """A runtime stream created through npurt(), destroyed at exit."""
    rt = npu.npurt()
    h = ctypes.c_void_p(0)
    with npu.device(device if device is not None else -1):
        assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
    assert h.value
    try:
        yield h.value
    finally:
        npu.synchronize(device if device is not None else 0)
        rt.npuStreamDestroy(h.value)


@pytest.fixture
def ext():
    with raw_stream() as ptr:
        yield npu.ExternalStream(ptr)


@pytest.fixture
def full_mode():
    npu.set_external_stream_mode("full")
    try:
        yield
    finally:
        npu.set_external_stream_mode("compat")


# --------------------------------------------------------------------------
# torch_npu's scenarios (compat mode)
# --------------------------------------------------------------------------


def test_default_mode_is_compat():
    assert npu.get_external_stream_mode() == "compat"


def test_creation(ext):
    assert ext.npu_stream != 0
    assert ext.device.index == npu.current_device()
    assert (ext.stream_id >> 30) == 1
    assert ext.device_type == npu.default_stream().device_type


def test_as_current(ext):
    with npu.stream(ext):
        cur = npu.current_stream()
        assert cur.npu_stream == ext.npu_stream
        assert cur == ext and type(cur) is npu.Stream
    assert npu.current_stream() == npu.default_stream()


def test_op_runs_on_it(ext):
    with npu.stream(ext):
        x = torch.randn(10, device="npu")
        y = x + 1
    npu.synchronize()
    assert torch.allclose(y.cpu(), x.cpu() + 1)


def test_same_pointer_same_entry():
    with raw_stream() as ptr:
        a, b = npu.ExternalStream(ptr), npu.ExternalStream(ptr)
        assert a.npu_stream == b.npu_stream == ptr
        assert a == b and a.stream_id == b.stream_id and hash(a) == hash(b)
        with raw_stream() as ptr2:
            assert npu.ExternalStream(ptr2).stream_id != a.stream_id


def test_isinstance(ext):
    assert isinstance(ext, npu.Stream)
    assert isinstance(ext, npu.ExternalStream)
    assert isinstance(ext, torch.Stream)


def test_synchronize_restriction(ext):
    with pytest.raises(RuntimeError, match="External NPU stream is not supported in NPUStream::synchronize. "
                       "The caller is responsible for synchronization of external streams."):
        ext.synchronize()


def test_query_restriction(ext):
    with pytest.raises(RuntimeError, match="Cannot query external NPU stream status. The caller must track "
                       "stream completion externally."):
        ext.query()


MANAGED = "This path requires a torch_npu-managed stream"


def _refusals(ext):
    t = torch.ones(4, device="npu")
    ev = npu.Event()
    ev.record()
    return {
        "record_event": lambda: ext.record_event(),
        "Event.record(ext)": lambda: npu.Event().record(ext),
        "ExternalEvent.record(ext)": lambda: npu.ExternalEvent().record(ext),
        "wait_event": lambda: ext.wait_event(ev),
        "wait_stream": lambda: ext.wait_stream(npu.current_stream()),
        "Event.wait(ext)": lambda: ev.wait(ext),
        "ExternalEvent.wait(ext)": lambda: npu.ExternalEvent().wait(ext),
        "Tensor.record_stream": lambda: t.record_stream(ext),
        "graph_task_group_begin": lambda: npu.graph_task_group_begin(ext),
        "graph_task_group_end": lambda: npu.graph_task_group_end(ext),
        "graph_task_update_begin": lambda: npu.graph_task_update_begin(ext, None),
        "graph_task_update_end": lambda: npu.graph_task_update_end(ext),
        "launch_callback": lambda: npu.launch_callback(lambda: None, ext),
        "subscribe_report": lambda: npu.subscribe_report(ext),
        "unsubscribe_report": lambda: npu.unsubscribe_report(ext),
    }


@pytest.mark.parametrize("api", list(_refusals.__code__.co_consts[1:2]) or ["_"], ids=["table"])
def test_every_refusal(ext, api):
    for name, fn in _refusals(ext).items():
        with pytest.raises(RuntimeError, match=r"External NPU stream is not supported in .*" + MANAGED) as info:
            fn()
        assert "not supported" in str(info.value), name


@pytest.mark.parametrize("api", ["NPUGraph.capture_begin", "NPUGraph.capture_end",
                                 "super_kernel_scope_begin", "super_kernel_scope_end"])
def test_current_stream_refusals(ext, api):
    fn = {
        "NPUGraph.capture_begin": lambda: npu.NPUGraph().capture_begin(),
        "NPUGraph.capture_end": lambda: npu.NPUGraph().capture_end(),
        "super_kernel_scope_begin": lambda: npu.super_kernel_scope_begin(),
        "super_kernel_scope_end": lambda: npu.super_kernel_scope_end(),
    }[api]
    with npu.stream(ext):
        with pytest.raises(RuntimeError, match="External NPU stream is not supported in .*" + MANAGED):
            fn()
    # On a managed stream the API works (test_graphs.py); here, outside a
    # capture on the default stream, only torch_npu's own checks can refuse.
    try:
        fn()
    except RuntimeError as e:
        assert "External NPU stream" not in str(e)


def test_queue_event_tasks_refused_through_generic_api(ext):
    # torch.Event goes through the guard and the task queue's record task.
    with pytest.raises(RuntimeError, match="External NPU stream is not supported in"):
        torch.Event(device="npu").record(ext)


def test_device_synchronize_covers_external_stream(ext):
    with npu.stream(ext):
        x = torch.ones(1000, device="npu")
        for _ in range(5):
            x = x * 2
    npu.synchronize()
    assert x[0].item() == 32.0


def test_npu_stream_drains_default_queue(ext):
    x = torch.randn(100, device="npu")
    y = x + 1
    assert ext.npu_stream != 0  # drains the default task queue
    npu.synchronize()
    assert torch.allclose(y.cpu(), x.cpu() + 1)


@pytest.mark.subprocess
def test_npu_stream_refused_with_per_stream_queue():
    out = run_py_ok(
        """
        import ctypes, torch_npu
        rt = torch_npu.npu.npurt()
        h = ctypes.c_void_p(0)
        assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
        ext = torch_npu.npu.ExternalStream(h.value)
        try:
            ext.npu_stream
            raise SystemExit("expected RuntimeError")
        except RuntimeError as e:
            assert "External NPU stream is not supported in NPUStream::stream() with per-stream task queue." in str(e), e
        import torch
        try:
            with torch_npu.npu.stream(ext):
                torch.ones(3, device="npu") + 1
            raise SystemExit("expected RuntimeError")
        except RuntimeError as e:
            assert "External NPU stream is not supported by task queue enqueue." in str(e), e
        rt.npuStreamDestroy(h.value)
        print("ok")
        """,
        env={"TASK_QUEUE_ENABLE": "1", "PER_STREAM_QUEUE": "1"},
    )
    assert "ok" in out


# --------------------------------------------------------------------------
# Beyond torch_npu (always on)
# --------------------------------------------------------------------------


def test_zero_pointer_is_value_error():
    with pytest.raises(ValueError, match=r"ExternalStream\(0\)"):
        npu.ExternalStream(0)


@pytest.mark.parametrize("extra", [{"stream_id": 1}, {"device_type": 20}])
def test_pointer_with_triple_is_error(extra):
    with raw_stream() as ptr:
        with pytest.raises(ValueError, match="stream_ptr cannot be combined"):
            npu.ExternalStream(ptr, **extra)


@pytest.mark.parametrize("kw,msg", [({"priority": -1}, "Priority was explicitly set for an external stream"),
                                    ({"is_sync_launch": True}, "is_sync_launch was explicitly set for an external stream")])
def test_constructor_checks(kw, msg):
    with raw_stream() as ptr:
        with pytest.raises(RuntimeError, match=msg):
            npu.ExternalStream(ptr, **kw)


@pytest.mark.parametrize("bad", [0xDEADBEEF, 1, 0x5354FFFFFFFFFFFF])
def test_garbage_handle(bad):
    with pytest.raises(RuntimeError, match=re.escape(hex(bad))):
        npu.ExternalStream(bad)


@pytest.mark.parametrize("bad", [-1, "0x1", 1.5, None])
def test_bad_pointer_types(bad):
    with pytest.raises((TypeError, ValueError)):
        npu.ExternalStream(bad)


def test_device_none_takes_handles_device():
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    with raw_stream(device=1) as ptr:
        assert npu.current_device() == 0
        s = npu.ExternalStream(ptr)
        assert s.device_index == 1
        assert npu.ExternalStream(ptr, device=1) == s
        assert npu.ExternalStream(ptr, device="npu:1") == s
        with pytest.raises(RuntimeError, match="belongs to device npu:1, but device npu:0 was given"):
            npu.ExternalStream(ptr, device=0)
        with npu.stream(s):
            assert npu.current_device() == 1
            y = torch.ones(4, device="npu:1") * 3
        npu.synchronize(1)
        assert y.sum().item() == 12


def test_device_index_keyword_is_checked_like_device():
    # device_index names a device just as `device` does: it used to be
    # ignored when 0 (a handle of npu:1 silently gave an npu:1 stream) and to
    # be a "cannot be combined" ValueError otherwise.
    if npu.device_count() < 2:
        pytest.skip("needs 2 simulated devices")
    with raw_stream(device=1) as ptr:
        s = npu.ExternalStream(ptr)
        mismatch = "belongs to device npu:1, but device npu:0 was given"
        for make in (lambda: npu.ExternalStream(ptr, device_index=0),
                     lambda: npu.Stream(stream_ptr=ptr, device_index=0),
                     lambda: npu.ExternalStream(ptr, device_index=0, stream_id=0, device_type=0),
                     lambda: npu.ExternalStream(ptr, device=0),
                     lambda: npu.ExternalStream(ptr, device="npu:0"),
                     lambda: npu.ExternalStream(ptr, device=torch.device("npu", 0)),
                     lambda: npu.Stream(stream_ptr=ptr, device="npu:0")):
            with pytest.raises(RuntimeError, match=mismatch):
                make()
        assert npu.ExternalStream(ptr, device_index=1) == s
        assert npu.Stream(stream_ptr=ptr, device_index=1) == s
        assert npu.ExternalStream(ptr, device_index=-1) == s  # -1: the handle's own device, as device=-1
        assert npu.ExternalStream(ptr, device=1, device_index=1) == s
        with pytest.raises(ValueError, match="device=npu:0 and device_index=1 name different devices"):
            npu.ExternalStream(ptr, device=0, device_index=1)
        with pytest.raises(RuntimeError, match="Invalid device_index: 5"):
            npu.ExternalStream(ptr, device_index=5)
        with pytest.raises(RuntimeError, match="Invalid device_index: -3"):
            npu.ExternalStream(ptr, device_index=-3)
    assert npu.current_device() == 0


def test_device_index_keyword_on_the_current_device():
    with raw_stream() as ptr:
        assert npu.ExternalStream(ptr, device_index=0).device_index == 0
        if npu.device_count() > 1:
            with pytest.raises(RuntimeError, match="belongs to device npu:0, but device npu:1 was given"):
                npu.ExternalStream(ptr, device_index=1)


def test_hash_and_repr_survive_destruction():
    # A dict keyed by the wrapper must still find it after the library
    # destroyed the stream: hash and repr use the handle's value, which never
    # changes, instead of npu_stream (which raises "was destroyed").
    rt = npu.npurt()
    h = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
    ext = npu.ExternalStream(h.value)
    rebuilt = npu.Stream(stream_id=ext.stream_id, device_index=ext.device_index, device_type=ext.device_type)
    with npu.stream(ext):
        current = npu.current_stream()
    want_hash = hash((h.value, ext.device))
    table = {ext: "ext"}
    assert hash(ext) == hash(rebuilt) == hash(current) == want_hash
    assert rt.npuStreamDestroy(h.value) == 0
    with pytest.raises(RuntimeError, match="was destroyed"):
        ext.npu_stream
    for w in (ext, rebuilt, current):
        assert hash(w) == want_hash
        assert repr(w) == f"<torch_npu.npu.Stream device=npu:0 npu_stream={h.value:#x}>"
        assert w in table
    assert table.pop(ext) == "ext" and not table


@pytest.mark.subprocess
def test_hash_and_repr_do_not_go_through_npu_stream_with_per_stream_queue():
    # Under PER_STREAM_QUEUE=1 (compat) npu_stream of an external stream
    # raises (torch_npu's refusal of the drain path), so hash/repr that read
    # npu_stream made such a stream unusable as a dict key.
    out = run_py_ok(
        """
        import ctypes, torch, torch_npu
        npu = torch_npu.npu
        rt = npu.npurt()
        h = ctypes.c_void_p(0)
        assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
        ext = npu.ExternalStream(h.value)
        try:
            ext.npu_stream
        except RuntimeError as e:
            print("npu_stream refused:", "per-stream task queue" in str(e))
        d = {ext: 1}
        print(d[ext], hash(ext) == hash((h.value, ext.device)), repr(ext).endswith(f"npu_stream={h.value:#x}>"))
        npu.synchronize()
        rt.npuStreamDestroy(h.value)
        """,
        env={"PER_STREAM_QUEUE": "1"},
    )
    assert out.split("\n")[:2] == ["npu_stream refused: True", "1 True True"], out


def test_destroyed_handle_raises_and_registry_entry_is_dropped():
    rt = npu.npurt()
    h = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
    s = npu.ExternalStream(h.value)
    old_id = s.stream_id
    assert rt.npuStreamDestroy(h.value) == 0
    for use in (lambda: s.npu_stream, lambda: npu.set_stream(s), lambda: npu.stream(s).__enter__(),
                lambda: npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
                .npu_stream):
        with pytest.raises(RuntimeError, match="was destroyed"):
            use()
    with pytest.raises(RuntimeError, match=re.escape(hex(h.value))):
        npu.ExternalStream(h.value)  # the handle itself is dead now
    assert npu.current_stream() == npu.default_stream()
    with raw_stream() as ptr2:  # a later stream is a new entry, never the old id
        assert npu.ExternalStream(ptr2).stream_id != old_id


def test_destroyed_while_current_does_not_crash():
    rt = npu.npurt()
    h = ctypes.c_void_p(0)
    rt.npuStreamCreate(ctypes.addressof(h))
    s = npu.ExternalStream(h.value)
    with pytest.raises(RuntimeError, match="was destroyed"):
        with npu.stream(s):
            rt.npuStreamDestroy(h.value)
            torch.ones(3, device="npu") + 1
    assert npu.current_stream() == npu.default_stream()


def test_many_threads_wrap_one_pointer():
    with raw_stream() as ptr:
        ids, errors = [], []

        def work():
            try:
                for _ in range(50):
                    ids.append(npu.ExternalStream(ptr).stream_id)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(set(ids)) == 1


# --------------------------------------------------------------------------
# Full mode
# --------------------------------------------------------------------------


def test_mode_switch_validation():
    with pytest.raises(ValueError):
        npu.set_external_stream_mode("fast")
    with pytest.raises(TypeError):
        npu.set_external_stream_mode(1)
    assert npu.get_external_stream_mode() == "compat"


def test_full_mode_everything_works(ext, full_mode):
    with npu.stream(ext):
        x = torch.ones(1000, device="npu") * 2
    ext.synchronize()
    assert ext.query()
    ev = ext.record_event()
    assert isinstance(ev, npu.Event)
    s = npu.Stream()
    s.wait_event(ev)
    s.wait_stream(ext)
    ext.wait_stream(s)
    npu.Event().record(ext)
    ev.wait(ext)
    ee = npu.ExternalEvent()
    ee.record(ext)
    ee.wait(s)
    x.record_stream(ext)
    torch_npu.erase_stream(x, ext)
    x.record_stream(ext)
    del x
    ext.synchronize()
    # graph APIs are not refused as external in full mode: outside a capture a
    # task group is npurt's illegal state, not torch_npu's refusal
    with pytest.raises(RuntimeError, match="npuErrorIllegalState"):
        npu.graph_task_group_begin(ext)


def test_env_selects_full_mode():
    out = run_py_ok(
        """
        import torch_npu
        print(torch_npu.npu.get_external_stream_mode())
        """,
        env={"TORCH_NPU_EXTERNAL_STREAM_MODE": "full"},
    )
    assert out.strip() == "full"


ORDERING = """
import ctypes, torch, torch_npu
npu = torch_npu.npu
npu.set_external_stream_mode("full")
rt = npu.npurt()
h = ctypes.c_void_p(0); assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
ext = npu.ExternalStream(h.value)
s = npu.Stream()
n = 1 << 16
# 1. ext -> s through Event.record(ext) / s.wait_event
a = torch.zeros(n, device="npu"); npu.synchronize()
with npu.stream(ext):
    a.add_(1); a.mul_(3)          # slow tasks (delay)
ev = npu.Event(); ev.record(ext)
s.wait_event(ev)
with npu.stream(s):
    b = a + 1
s.synchronize()
assert b[0].item() == 4.0, b[0].item()
# 2. s -> ext through wait_stream
c = torch.zeros(n, device="npu"); npu.synchronize()
with npu.stream(s):
    c.add_(5); c.mul_(2)
ext.wait_stream(s)
with npu.stream(ext):
    d = c * 1
ext.synchronize()
assert d[0].item() == 10.0, d[0].item()
# 3. synchronize waits for the delayed tasks; query is true afterwards
with npu.stream(ext):
    e = torch.ones(n, device="npu"); e.mul_(7)
ext.synchronize(); assert ext.query() and e[0].item() == 7.0
# 4. ExternalEvent: wait queued on s before the record on ext
ee = npu.ExternalEvent()
f = torch.zeros(n, device="npu"); npu.synchronize()
ee.wait(s)
with npu.stream(s):
    g = f + 1                     # must see the value written after the record
with npu.stream(ext):
    f.add_(41)
ee.record(ext)
s.synchronize()
assert g[0].item() == 42.0, g[0].item()
# 5. record_stream: the block must not be reused before ext's reader ran
x = torch.ones(n, device="npu"); npu.synchronize()
with npu.stream(ext):
    y = x * 2                     # slow reader of x on ext
x.record_stream(ext)
ptr = x.data_ptr(); del x
z = torch.full((n,), 9.0, device="npu")   # default stream
ext.synchronize(); npu.synchronize()
assert y[0].item() == 2.0, y[0].item()
npu.synchronize(); rt.npuStreamDestroy(h.value)
print("ordered")
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("extra_env", [{}, {"PER_STREAM_QUEUE": "1"}, {"TASK_QUEUE_ENABLE": "0"}],
                         ids=["queue", "per-stream-queue", "no-queue"])
def test_full_mode_ordering_with_delay(extra_env):
    env = {"NPU_SIM_TASK_DELAY_US": "20000", **extra_env}
    assert "ordered" in run_py_ok(ORDERING, env=env, timeout=120)


@pytest.mark.subprocess
def test_full_mode_per_stream_queue_npu_stream_allowed():
    out = run_py_ok(
        """
        import ctypes, torch, torch_npu
        npu = torch_npu.npu
        rt = npu.npurt(); h = ctypes.c_void_p(0); rt.npuStreamCreate(ctypes.addressof(h))
        ext = npu.ExternalStream(h.value)
        with npu.stream(ext):
            x = torch.ones(8, device="npu") * 2
        assert ext.npu_stream == h.value
        ext.synchronize()
        print(x.sum().item())
        """,
        env={"PER_STREAM_QUEUE": "1", "TORCH_NPU_EXTERNAL_STREAM_MODE": "full"},
    )
    assert out.strip() == "16.0"


@pytest.mark.subprocess
def test_interop_example_runs():
    """examples/interop against this package, once built (`make demo` builds it in place; CI
    builds and runs it against an installed wheel in `make test-packaging`)."""
    import glob
    import os
    from conftest import REPO_ROOT

    example = os.path.join(REPO_ROOT, "examples", "interop")
    if not glob.glob(os.path.join(example, "npu_interop*.so")):
        pytest.skip("examples/interop is not built (make demo builds it; make test-packaging runs it)")
    out = subprocess.run([sys.executable, "interop.py"], cwd=example, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": PKG_ROOT})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[compat]" in out.stdout and "[full]" in out.stdout and "[c++]" in out.stdout
