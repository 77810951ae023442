"""Many Python threads, each with its own current stream: each thread sets its
stream, runs ops, checks results and that current_stream() is its own; plus
several threads launching onto one shared stream, and stream contexts entered
by several threads at once. Results are compared with a gold value computed
on cpu; thread counts are swept."""

import threading

import pytest
import torch


def run_threads(n, target):
    errors = []
    barrier = threading.Barrier(n)

    def wrap(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("nthreads", [2, 4, 8])
def test_each_thread_own_current_stream(nthreads):
    def work(i):
        dev = i % 2
        torch.npu.set_device(dev)
        s = torch.npu.Stream(device=dev)
        torch.npu.set_stream(s)
        for it in range(20):
            assert torch.npu.current_stream() == s
            x = torch.full((256,), float(i), device="npu")
            y = (x * 2 + it).sum()
            assert y.item() == 256 * (2 * i + it)
        assert torch.npu.current_stream() == s
        assert torch.npu.current_device() == dev

    run_threads(nthreads, work)
    # threads do not leak their stream into the main thread
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_thread_starts_on_default_stream_and_device():
    s = torch.npu.Stream()
    torch.npu.set_stream(s)
    seen = []
    t = threading.Thread(target=lambda: seen.append((torch.npu.current_stream(), torch.npu.current_device())))
    t.start()
    t.join()
    assert seen == [(torch.npu.default_stream(0), 0)]
    assert torch.npu.current_stream() == s


@pytest.mark.parametrize("nthreads", [2, 6])
def test_threads_share_one_stream(nthreads):
    shared = torch.npu.Stream()
    acc = torch.zeros(nthreads, 64, device="npu")
    torch.npu.synchronize()

    def work(i):
        with torch.npu.stream(shared):
            for _ in range(25):
                acc[i].add_(1)
            assert torch.npu.current_stream() == shared

    run_threads(nthreads, work)
    shared.synchronize()
    assert torch.equal(acc.cpu(), torch.full((nthreads, 64), 25.0))


def test_one_stream_context_entered_by_many_threads():
    streams = [torch.npu.Stream() for _ in range(4)]
    ctx = torch.npu.stream(streams[0])  # one StreamContext object shared by all

    def work(i):
        torch.npu.set_stream(streams[i])
        for _ in range(30):
            with ctx:
                assert torch.npu.current_stream() == streams[0]
            assert torch.npu.current_stream() == streams[i]

    run_threads(4, work)


def test_threads_with_torch_stream_contexts_and_events():
    def work(i):
        s = torch.Stream(device=f"npu:{i % 2}")
        with s:
            x = torch.arange(100.0, device=f"npu:{i % 2}") * i
            e = torch.Event(device="npu")
            e.record(s)
        e.synchronize()
        assert x.sum().item() == 4950 * i
        assert torch.accelerator.current_stream(i % 2).stream_id == 0

    run_threads(6, work)


def test_threads_mixed_ops_gold():
    g = torch.Generator().manual_seed(5)
    inputs = [torch.randn(32, 32, generator=g) for _ in range(6)]
    gold = [(a @ a.t()).tanh().sum(0) for a in inputs]
    results = [None] * 6

    def work(i):
        torch.npu.set_stream(torch.npu.Stream())
        a = inputs[i].npu()
        results[i] = (a @ a.t()).tanh().sum(0).cpu()

    run_threads(6, work)
    for r, want in zip(results, gold):
        torch.testing.assert_close(r, want, atol=1e-5, rtol=1e-5)
