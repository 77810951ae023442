"""Reliability: errors belong to streams, poisoned tensors, the synchronous op
path in stream order, and the metadata cache's key.

Each test here reproduces a defect that once corrupted data, lost an error or
hung (issue "Trustworthy under threads, faults and fork"); see
docs/RELIABILITY.md for the whole map of what is tested where.
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch_npu

from conftest import run_py_ok

OOB = "out of (bounds|range)"


def _bad_index_select(x: torch.Tensor) -> torch.Tensor:
    return torch.index_select(x, 0, torch.tensor([99], device=x.device))


# --- output metadata cache -------------------------------------------------

@pytest.mark.parametrize("op", [torch.angle, torch.logit, torch.sqrt, torch.sigmoid])
def test_metadata_cache_follows_the_default_dtype(op):
    x = torch.arange(1, 5, dtype=torch.int32)
    assert op(x.npu()).dtype == op(x).dtype  # fills the cache under float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got, want = op(x.npu()), op(x)
        assert got.dtype == want.dtype == torch.float64
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    finally:
        torch.set_default_dtype(old)
    assert op(x.npu()).dtype == torch.float32


def test_metadata_cache_tells_wrapped_numbers_from_zero_dim_tensors():
    h = torch.ones(3, dtype=torch.float16, device="npu")
    assert (h + 2.5).dtype == torch.float16  # a Python scalar does not promote
    t = torch.tensor(2.5, dtype=torch.float64, device="npu")
    assert (h + t).dtype == torch.float16  # nor does a 0-dim tensor of another category...
    assert (h + 2.5).dtype == torch.float16  # ...and the two are cached apart
    i = torch.ones(3, dtype=torch.int32, device="npu")
    assert (i + 2.5).dtype == torch.get_default_dtype()
    assert (i + torch.tensor(2.5, dtype=torch.float64, device="npu")).dtype == torch.float64


# --- poisoned tensors ---------------------------------------------------------

def _op_path_state(name: str, overload: str) -> dict:
    return torch_npu._C._testing_opPathState(name, overload)


def test_an_out_tensor_of_an_impossible_dtype_is_refused_at_the_call():
    a = torch.ones(2, 3, device="npu")
    bad = torch.empty(2, 3, dtype=torch.int64, device="npu")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.add(a, a, out=bad)
    torch.npu.synchronize()  # nothing was queued: no failure left on the stream
    assert _op_path_state("aten::add", "out") == {"out_variant_broken": False, "meta_untrusted": False}


def test_a_user_error_in_an_out_kernel_does_not_demote_the_op():
    # mm.out refuses an out tensor whose dtype is not the inputs' (as on CPU).
    # That is the caller's error: it is reported, with CPU's text, and later
    # calls still run the out kernel asynchronously. (It once marked mm.out
    # broken, and made mm synchronous, for the rest of the process.)
    a = torch.ones(2, 3, device="npu")
    b = torch.ones(3, 4, device="npu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        torch.mm(a, b, out=torch.empty(2, 4, dtype=torch.float64, device="npu"))
        torch.npu.synchronize()
    assert _op_path_state("aten::mm", "out") == {"out_variant_broken": False, "meta_untrusted": False}
    torch_npu.npu.reset_host_sync_stats()
    out = torch.empty(2, 4, device="npu")
    torch.mm(a, b, out=out)
    assert torch_npu.npu.host_sync_count() == 0
    assert out.cpu().tolist() == [[3.0] * 4] * 2


def test_outputs_of_work_discarded_after_a_failure_raise_the_original_error():
    x = torch.arange(5.0, device="npu")
    bad = _bad_index_select(x)
    z = x + 100  # discarded behind the failure: never computed
    with pytest.raises(RuntimeError, match=f"aten::index_select.*{OOB}"):
        torch.npu.synchronize()
    torch.npu.synchronize()  # reported once
    for t in (z, bad):
        for _ in range(2):  # sticky: every read raises, none returns garbage
            with pytest.raises(RuntimeError, match=f"no valid data.*aten::index_select.*{OOB}"):
                t.cpu()
            with pytest.raises(RuntimeError, match="no valid data"):
                t.sum().item()
    assert (x + 1).sum().item() == 15  # the input is intact


def test_poison_spreads_along_the_data_not_along_the_stream():
    x = torch.arange(5.0, device="npu")
    bad = _bad_index_select(x)
    with pytest.raises(RuntimeError, match="aten::index_select"):
        torch.npu.synchronize()
    derived = bad * 2 + 1  # uses the poisoned tensor: poisoned too
    fine = x * 2  # does not: computed
    assert fine.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    with pytest.raises(RuntimeError, match=f"no valid data.*aten::index_select.*{OOB}"):
        derived.tolist()
    torch.npu.synchronize()  # the spread is no new failure of the stream


def test_overwriting_a_poisoned_tensor_heals_it():
    x = torch.arange(5.0, device="npu")
    bad = _bad_index_select(x)
    with pytest.raises(RuntimeError):
        torch.npu.synchronize()
    bad[:0].fill_(1)  # a partial write does not make the rest valid
    with pytest.raises(RuntimeError, match="no valid data"):
        bad.item()
    bad.copy_(torch.tensor([7.0]))
    assert bad.item() == 7.0


def test_failure_on_one_stream_leaves_other_streams_results_intact():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    x = torch.arange(5.0, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s1):
        bad = _bad_index_select(x)
        after = x + 1
    with torch.npu.stream(s2):
        good = x * 3
    s2.synchronize()  # s1's failure is not s2's
    assert good.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]
    with pytest.raises(RuntimeError, match="aten::index_select"):
        s1.synchronize()
    s1.synchronize()
    with pytest.raises(RuntimeError, match="no valid data"):
        after.cpu()
    del bad


# --- the synchronous path runs in stream order -------------------------------

def test_synchronous_op_output_is_not_overwritten_by_work_of_another_thread():
    # Thread A runs a data-dependent op (the synchronous path) whose output has
    # the size of `a`; thread B queues r = a * 1 and drops `a` at once, so r's
    # task may still be queued when A's output takes a's freed block. A must
    # write its output in stream order, after r read the block. (Timing
    # decides whether the two meet: before the fix, some runs of this test
    # had a wrong r, not every run.)
    out = run_py_ok(
        """
        import threading, torch, torch_npu
        n = 1 << 18
        big = torch.ones(n, device="npu")  # nonzero(big): n x 1 int64 = 8n bytes
        torch.npu.synchronize()
        stop = False
        def a_side():
            while not stop:
                torch.nonzero(big)
        rs = []
        def b_side():
            for i in range(200):
                a = torch.full((2 * n,), float(i), device="npu")  # 8n bytes
                rs.append((i, a * 1))
                del a
        ta, tb = threading.Thread(target=a_side), threading.Thread(target=b_side)
        ta.start(); tb.start(); tb.join(); stop = True; ta.join()
        bad = [i for i, r in rs if not torch.equal(r.cpu(), torch.full((2 * n,), float(i)))]
        print("BAD", bad)
        """,
        timeout=240,
    )
    assert "BAD []" in out, out


def test_synchronous_op_mutations_happen_in_stream_order(gate):
    # An op without a meta kernel that writes its argument must not write it
    # from the host ahead of the work queued before it.
    x = torch.zeros(4, device="npu")
    g = gate(torch.npu.current_stream())
    y = x + 1  # queued behind the gate: reads x == 0
    done = threading.Event()

    def run() -> None:
        torch.nonzero(x + 5)  # synchronous path, on the same stream
        done.set()

    t = threading.Thread(target=run)
    t.start()
    assert not done.wait(0.05)  # it waits for the gated stream
    g.release()
    t.join()
    assert y.tolist() == [1.0, 1.0, 1.0, 1.0]


# --- external streams destroyed with queued work -----------------------------

def test_external_stream_destroyed_with_ops_queued_keeps_every_result():
    # The owner destroys its stream while PyTorch ops for it still sit in the
    # task queue (and, with the delay, in the stream): every result is right.
    out = run_py_ok(
        """
        import ctypes, torch, torch_npu
        npu = torch_npu.npu
        rt = npu.npurt()
        h = ctypes.c_void_p(0)
        assert rt.npuStreamCreate(ctypes.addressof(h)) == 0
        ext = npu.ExternalStream(h.value)
        x = torch.arange(1024.0, device="npu"); npu.synchronize()
        with npu.stream(ext):
            outs = [x + i for i in range(300)]
        assert rt.npuStreamDestroy(h.value) == 0
        npu.synchronize()  # device-wide: covers the destroyed stream's work
        bad = [i for i, o in enumerate(outs) if not torch.equal(o.cpu(), torch.arange(1024.0) + i)]
        print("BAD", bad)
        try:
            with npu.stream(ext):
                x + 1
            print("USE AFTER DESTROY ACCEPTED")
        except RuntimeError as e:
            print("REFUSED", "destroyed" in str(e) or "Unrecognized" in str(e) or "invalid" in str(e).lower())
        """,
        env={"NPU_SIM_TASK_DELAY_US": "200"},
        timeout=120,
    )
    assert "BAD []" in out, out


# --- hangs ----------------------------------------------------------------------

def test_launch_blocking_external_event_wait_before_record_does_not_deadlock():
    out = run_py_ok(
        """
        import torch, torch_npu
        npu = torch_npu.npu
        s1, s2 = npu.Stream(), npu.Stream()
        e = npu.ExternalEvent()
        e.wait(s2)          # before its record: must not block the host
        e.record(s1)
        s2.synchronize()
        print("OK")
        """,
        env={"ASCEND_LAUNCH_BLOCKING": "1"},
        timeout=60,
    )
    assert "OK" in out


def test_busy_poll_consumer_sleeps_when_idle():
    # TASK_QUEUE_ENABLE=2 polls while work flows, not forever: after the work
    # stopped, the consumer thread uses (almost) no CPU. The idle period is a
    # measurement window, not a wait for asynchronous work.
    out = run_py_ok(
        """
        import os, time, torch, torch_npu
        x = torch.ones(4, device="npu"); (x + 1).sum().item()
        def consumer_ticks():
            total = 0
            for tid in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if f.read().strip() != "npu taskqueue":
                        continue
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime + stime
            return total
        time.sleep(0.1)  # past the polling linger
        before = consumer_ticks()
        time.sleep(1.0)
        print("TICKS", consumer_ticks() - before, os.sysconf("SC_CLK_TCK"))
        """,
        env={"TASK_QUEUE_ENABLE": "2"},
        timeout=60,
    )
    ticks, hz = (int(v) for v in out.split("TICKS")[1].split())
    assert ticks < hz // 10, out  # under 0.1 s of CPU in 1 s


# --- pinned host cache ------------------------------------------------------------

def test_pinned_cache_stays_bounded_when_sizes_vary():
    # One pinned tensor at a time, of ever-changing sizes: the cache reuses
    # size classes instead of keeping one block per size ever seen.
    torch_npu.npu.synchronize()
    peak_in_use = 0
    for n in range(1000, 200_000, 1999):
        t = torch.empty(n, dtype=torch.uint8).pin_memory()
        peak_in_use = max(peak_in_use, n)
        del t
    reserved = torch_npu.npu.host_memory_stats()["allocated_bytes.current"]
    assert reserved <= 4 * peak_in_use, reserved
