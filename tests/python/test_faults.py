"""Fault injection, fork and many threads: the process survives, errors are
reported once on the stream they belong to, and no read returns garbage.

Faults come from npurt's test hook (npuSetFaultInjection, through ctypes):
the n-th launch, work task, copy or allocation from the arming fails.
"""

from __future__ import annotations

import ctypes
import os
import random
import threading

import pytest
import torch
import torch_npu

from conftest import load_npurt, run_py_ok

LAUNCH, TASK, COPY, ALLOC = 0, 1, 2, 3


def arm(kind: int, nth: int) -> None:
    rt = load_npurt()
    rt.npuSetFaultInjection.argtypes = [ctypes.c_int, ctypes.c_uint64]
    assert rt.npuSetFaultInjection(kind, nth) == 0


@pytest.fixture(autouse=True)
def _disarm():
    yield
    for kind in (LAUNCH, TASK, COPY, ALLOC):
        arm(kind, 0)


@pytest.mark.parametrize("kind", [LAUNCH, TASK])
def test_a_failed_launch_or_task_surfaces_once_on_its_stream(kind):
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    x = torch.arange(8.0, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s2):
        other = x * 3
    s2.synchronize()  # so that the fault cannot hit s2's work
    arm(kind, 1)
    with torch.npu.stream(s1):
        hit = x + 1  # the faulted op
        behind = hit * 2
    with pytest.raises(RuntimeError, match="aten::add.*injected fault"):
        s1.synchronize()
    s1.synchronize()  # once
    torch.npu.synchronize()  # and not again at the device level
    with torch.npu.stream(s2):
        later = other + 1  # the other stream keeps working on intact data
    s2.synchronize()  # a host read waits for the current stream only
    assert other.tolist() == [3.0 * i for i in range(8)]
    assert later.tolist() == [3.0 * i + 1 for i in range(8)]
    for t in (hit, behind):  # no garbage: every read raises the original error
        with pytest.raises(RuntimeError, match="no valid data.*injected fault"):
            t.cpu()
    assert (x + 1).tolist() == [i + 1.0 for i in range(8)]  # the process continues


def test_a_failed_launch_is_not_lost_when_the_next_push_is_an_event_destroy():
    x = torch.arange(4.0, device="npu")
    torch.npu.synchronize()
    arm(LAUNCH, 1)
    y = x + 1
    e = torch.npu.Event()
    e.record()
    del e  # pushes an event destroy into the queue
    with pytest.raises(RuntimeError, match="aten::add.*injected fault"):
        torch.npu.synchronize()
    del y


def test_a_failed_copy_raises_at_the_read_and_leaves_the_tensor_readable_after():
    x = torch.arange(4.0, device="npu")
    torch.npu.synchronize()
    arm(TASK, 1)
    with pytest.raises(RuntimeError, match="injected fault"):
        x.cpu()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]  # reading again works: x was never written


def test_a_failed_device_allocation_is_retried_once():
    # The caching allocator answers a failed npuMalloc by releasing its cache
    # and retrying (as CUDA's does); one injected failure is absorbed.
    torch.npu.empty_cache()
    before = torch_npu.npu.memory_stats()["num_alloc_retries"]
    arm(ALLOC, 1)
    x = torch.ones(1 << 20, device="npu")
    assert torch_npu.npu.memory_stats()["num_alloc_retries"] == before + 1
    assert x.sum().item() == float(1 << 20)


def test_device_out_of_memory_is_an_error_and_the_allocator_recovers():
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(1 << 40, device="npu")  # 4 TiB of float32 > NPU_SIM_MEMORY_MB
    assert torch.ones(1 << 20, device="npu").sum().item() == float(1 << 20)


def test_resize_keeps_data_and_shape_when_its_launch_fails():
    out = run_py_ok(
        """
        import ctypes, torch, torch_npu
        from conftest import load_npurt
        rt = load_npurt()
        x = torch.arange(4.0, device="npu"); torch.npu.synchronize()
        rt.npuSetFaultInjection.argtypes = [ctypes.c_int, ctypes.c_uint64]
        rt.npuSetFaultInjection(0, 1)  # the next launch fails (direct launch: raised here)
        try:
            x.resize_(1000)
            print("NO ERROR")
        except RuntimeError as e:
            print("RAISED", "injected fault" in str(e))
        print("SHAPE", tuple(x.shape), x.tolist())
        """,
        env={"TASK_QUEUE_ENABLE": "0", "PYTHONPATH": os.path.join(os.path.dirname(__file__))},
    )
    assert "RAISED True" in out and "SHAPE (4,) [0.0, 1.0, 2.0, 3.0]" in out, out


# --- fork ----------------------------------------------------------------------

def test_fork_after_use_refuses_npu_in_the_child_and_exits_cleanly():
    out = run_py_ok(
        """
        import os, torch, torch_npu
        (torch.ones(2, device="npu") + 1).sum().item()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                assert torch_npu.npu._is_in_bad_fork()
                torch.ones(2) * 3  # CPU work is fine
                try:
                    torch.ones(2, device="npu")
                    code = 3
                except RuntimeError as e:
                    if "Cannot re-initialize NPU in forked subprocess" not in str(e):
                        code = 4
            except BaseException:
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status), torch_npu.npu._is_in_bad_fork())
        """,
        timeout=60,
    )
    assert "CHILD 0 False" in out, out


def test_fork_before_use_and_dataloader_fork_workers():
    out = run_py_ok(
        """
        import os, torch, torch_npu
        from torch.utils.data import DataLoader, TensorDataset
        pid = os.fork()
        if pid == 0:  # the parent never used the npu: the child may
            ok = torch.ones(3, device="npu").sum().item() == 3.0
            os._exit(0 if ok and not torch_npu.npu._is_in_bad_fork() else 1)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status))
        w = torch.ones(4, device="npu")
        loader = DataLoader(TensorDataset(torch.arange(32.0).view(8, 4)), batch_size=2,
                            num_workers=2, multiprocessing_context="fork")
        total = sum((b.npu() * w).sum().item() for (b,) in loader)
        print("TOTAL", total)
        """,
        timeout=120,
    )
    assert "CHILD 0" in out and f"TOTAL {float(sum(range(32)))}" in out, out


# --- many threads ------------------------------------------------------------

def test_sixteen_threads_sharing_and_not_sharing_streams():
    shared = [torch.npu.Stream() for _ in range(3)]
    errors: list = []

    def worker(k: int) -> None:
        rng = random.Random(k)
        own = torch.npu.Stream()
        try:
            for it in range(25):
                s = own if k % 2 else shared[k % 3]
                with torch.npu.stream(s):
                    base = torch.full((64,), float(k), device="npu")
                    y = base * 2 + it  # plain ops
                    nz = torch.nonzero(y > k + it)  # data-dependent (synchronous path)
                    tmp = torch.randn(128, device="npu")
                    del tmp  # frees while work is queued
                    ev = torch.npu.Event()
                    ev.record(s)
                other = torch.npu.Stream()
                other.wait_event(ev)
                with torch.npu.stream(other):
                    z = y - it  # on another stream, after the event
                if rng.random() < 0.3:
                    torch.npu.synchronize()
                if y.sum().item() != 64 * (2.0 * k + it):
                    errors.append((k, it, "y"))
                if nz.shape[0] != (64 if k > 0 else 0):  # 2k + it > k + it iff k > 0
                    errors.append((k, it, "nonzero", tuple(nz.shape)))
                other.synchronize()
                if not torch.equal(z.cpu(), torch.full((64,), 2.0 * k)):
                    errors.append((k, it, "z"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert errors == []


def test_the_out_of_memory_retry_does_not_take_another_streams_failure():
    # The retry used to synchronize the device, which reported (and so
    # cleared) a failure that belonged to another stream's synchronize.
    s1 = torch.npu.Stream()
    x = torch.arange(4.0, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(s1):
        torch.index_select(x, 0, torch.tensor([9], device="npu"))
    torch.npu.empty_cache()
    arm(ALLOC, 1)  # the next npuMalloc fails: the allocator retries
    y = torch.ones(1 << 20, device="npu")
    with pytest.raises(RuntimeError, match="aten::index_select"):
        s1.synchronize()
    assert y.sum().item() == float(1 << 20)


def test_synchronize_is_not_starved_by_a_thread_that_keeps_queueing():
    out = run_py_ok(
        """
        import threading, torch, torch_npu
        s = torch.npu.Stream()
        x = torch.ones(16, device="npu")
        s.wait_stream(torch.npu.current_stream())  # x is made on the default stream
        stop = threading.Event()
        def flood():  # keeps 10-20 ops queued on s: never idle, never far behind
            pending = []
            with torch.npu.stream(s):
                while not stop.is_set():
                    for _ in range(10):
                        x.add_(0)
                    e = torch.npu.Event()
                    e.record(s)
                    pending.append(e)
                    if len(pending) > 1:
                        pending.pop(0).synchronize()
        t = threading.Thread(target=flood); t.start()
        with torch.npu.stream(s):
            y = x * 2
        for _ in range(3):
            s.synchronize()             # returns: waits for the work queued before it
            torch.npu.synchronize()
        print("Y", y.sum().item())
        stop.set(); t.join()
        """,
        env={"NPU_SIM_TASK_DELAY_US": "500"},
        timeout=120,
    )
    assert "Y 32.0" in out, out
