"""Copies: cpu<->npu, npu<->npu on one device and across devices, blocking and
non_blocking (pinned memory via ``pin_memory()``), non-contiguous sources and
destinations, dtype conversion during the copy, and ordering of a copy with
the work queued before it."""

import pytest
import torch

from conftest import read_f32


@pytest.fixture
def src():
    return torch.randn(32, 17, generator=torch.Generator().manual_seed(3))


def test_cpu_to_npu_and_back(src):
    n = src.to("npu")
    assert n.device == torch.device("npu:0")
    assert torch.equal(n.cpu(), src)
    assert torch.equal(src.npu(1).cpu(), src)


def test_copy_into_existing_tensors(src):
    n = torch.empty(32, 17, device="npu")
    n.copy_(src)
    back = torch.empty(32, 17)
    back.copy_(n)
    assert torch.equal(back, src)


def test_npu_to_npu_same_device(src):
    a = src.npu()
    b = torch.empty_like(a)
    b.copy_(a)
    assert b.data_ptr() != a.data_ptr()
    assert torch.equal(b.cpu(), src)
    assert torch.equal(a.clone().cpu(), src)


@pytest.mark.parametrize("direction", [(0, 1), (1, 0)])
def test_npu_to_npu_across_devices(src, direction):
    s, d = direction
    a = src.to(f"npu:{s}") * 2  # pending work on the source device
    b = a.to(f"npu:{d}")
    assert b.device.index == d
    assert torch.equal(b.cpu(), src * 2)
    c = torch.zeros(32, 17, device=f"npu:{d}")
    c.copy_(a)
    assert torch.equal(c.cpu(), src * 2)


def test_cross_device_copy_waits_for_blocked_source(gate, src):
    a = src.npu(0)
    torch.npu.synchronize(0)
    g = gate(torch.npu.current_stream(0))
    a.mul_(3)
    b = a.to("npu:1")  # must wait for mul_ on device 0
    g.release()
    assert torch.equal(b.cpu(), src * 3)


def test_non_contiguous_copies(src):
    n = src.npu()
    assert torch.equal(n.t().cpu(), src.t())
    assert torch.equal(n[::2, 3:9].cpu(), src[::2, 3:9])
    dst = torch.zeros(17, 32, device="npu")
    dst.copy_(src.t())
    assert torch.equal(dst.cpu(), src.t())
    dst2 = torch.zeros(40, 40, device="npu")
    dst2[4:36, 1:18].copy_(n)
    assert torch.equal(dst2.cpu()[4:36, 1:18], src)
    assert dst2.cpu()[0].abs().sum() == 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int32, torch.bool])
def test_dtype_converting_copies(src, dtype):
    assert torch.equal(src.npu().to(dtype).cpu(), src.to(dtype))
    assert torch.equal(src.to("npu", dtype=dtype).cpu(), src.to(dtype))
    d = torch.empty(32, 17, dtype=dtype)
    d.copy_(src.npu())
    assert torch.equal(d, src.to(dtype))


def test_pin_memory():
    p = torch.arange(10.0).pin_memory()
    assert p.is_pinned()
    assert torch.equal(p, torch.arange(10.0))
    e = torch.empty(4, pin_memory=True)
    assert e.is_pinned()


def test_non_blocking_h2d_from_pinned(gate):
    p = torch.arange(256.0).pin_memory()
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    n = p.to("npu", non_blocking=True)  # must return while the stream is blocked
    assert n.device.type == "npu"
    g.release()
    assert torch.equal(n.cpu(), torch.arange(256.0))


def test_non_blocking_d2h_into_pinned(gate):
    n = torch.full((256,), 4.0, device="npu")
    torch.npu.synchronize()
    dst = torch.zeros(256).pin_memory()
    g = gate(torch.npu.current_stream())
    dst.copy_(n, non_blocking=True)  # returns at once; the data arrives later
    assert dst[0].item() == 0.0
    g.release()
    torch.npu.current_stream().synchronize()
    assert torch.equal(dst, torch.full((256,), 4.0))


def test_queued_copies_do_not_hold_memory_of_their_own_stream(gate):
    # Note [Task captures and memory reuse]: a cast whose result the program drops goes
    # back to the pool while the copy is still queued (as on CUDA, and as any op's output).
    x = torch.arange(256.0, device="npu")
    other = torch.npu.Stream()
    y = torch.full((256,), 2.0, device="npu")
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    g = gate(torch.npu.current_stream())
    for _ in range(4):
        half = x.to(torch.half)
        del half
    assert torch.npu.memory_allocated() == base  # the four copies are queued, not run
    kept = x.to(torch.float64)
    with torch.npu.stream(other):
        z = torch.empty(256, device="npu")
        z.copy_(y)  # y is memory of another stream: the copy keeps it until it ran
    other.synchronize()
    g.release()
    assert kept.cpu().tolist() == list(range(256)) and z.cpu().tolist() == [2.0] * 256


def test_non_blocking_pinned_source_not_reused_early():
    # The pinned block behind a queued non_blocking copy must not be handed
    # out again before the copy ran.
    outs = []
    for i in range(20):
        p = torch.full((1024,), float(i)).pin_memory()
        outs.append(p.to("npu", non_blocking=True))
        del p
    torch.npu.synchronize()
    for i, o in enumerate(outs):
        assert o.min().item() == i and o.max().item() == i


def test_non_blocking_from_pageable_is_synchronous():
    c = torch.arange(100.0)
    n = c.to("npu", non_blocking=True)
    c.zero_()  # the copy already happened (pageable memory)
    assert torch.equal(n.cpu(), torch.arange(100.0))


def test_blocking_d2h_waits_for_work(gate):
    x = torch.zeros(64, device="npu")
    torch.npu.synchronize()
    g = gate(torch.npu.current_stream())
    x.fill_(9.0)
    g.release()
    assert torch.equal(x.cpu(), torch.full((64,), 9.0))


def test_copy_on_side_stream():
    s = torch.npu.Stream()
    c = torch.arange(50.0)
    with torch.npu.stream(s):
        n = c.npu()
        m = n * 2
        back = m.cpu()  # blocking: synchronizes s
    assert torch.equal(back, c * 2)


def test_empty_and_zero_dim_copies():
    assert torch.empty(0, 4).npu().cpu().shape == (0, 4)
    assert torch.tensor(2.5).npu().item() == 2.5
    z = torch.tensor(2.5).npu(1).to("npu:0")
    assert z.device.index == 0 and z.item() == 2.5


def test_copy_between_devices_then_inplace_on_source():
    a = torch.ones(100, device="npu:0")
    b = a.to("npu:1")
    a.add_(1)  # must not affect the copy already queued
    assert b.sum().item() == 100
    assert a.sum().item() == 200


def test_read_f32_helper_matches_cpu():
    x = torch.tensor([1.5, -2.0], device="npu")
    torch.npu.synchronize()
    assert read_f32(x, 0) == 1.5 and read_f32(x, 1) == -2.0
