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
