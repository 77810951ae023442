"""torch_npu's FLOP counter: ``torch_npu.utils.FlopsCounter`` and
``torch_npu._C._flops_count._FlopCountContext``.

Counts are checked against hand-computed formulas (2 FLOPs per multiply-add)
and against PyTorch's ``FlopCounterMode``, which counts the same ops by the
same formulas one level up (it sees aten.mm, aten.convolution, ...). The
counter is process-wide: every test stops (resets) it when done.
"""

from __future__ import annotations

import threading
import warnings
from typing import Iterator

import pytest
import torch
import torch_npu
from torch.utils.flop_counter import FlopCounterMode

from torch_npu.utils import FlopsCounter


@pytest.fixture
def counter() -> Iterator[FlopsCounter]:
    c = FlopsCounter()
    c.stop()
    c.start()
    yield c
    c.stop()


def npu(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).npu()


def test_public_names():
    assert torch_npu.utils.FlopsCounter is torch_npu.utils.flops_count._FlopsCounter
    assert "FlopsCounter" in torch_npu.utils.__all__
    ctx = torch_npu._C._flops_count._FlopCountContext.GetInstance()
    assert ctx is torch_npu._C._flops_count._FlopCountContext.GetInstance()
    for name in ("enable", "disable", "pause", "resume", "reset", "recordedCount", "traversedCount"):
        assert hasattr(ctx, name), name


def test_deprecated_spelling_warns_and_works():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        old = torch_npu.utils.flops_count.FlopsCounter()
    assert len(w) == 1 and issubclass(w[0].category, FutureWarning)
    assert "will be deprecated" in str(w[0].message) and "torch_npu.utils.FlopsCounter()" in str(w[0].message)
    assert w[0].filename == __file__  # points at the caller
    old.start()
    try:
        npu(2, 3) @ npu(3, 4)
        assert old.get_flops() == [2 * 2 * 3 * 4] * 2
    finally:
        old.stop()


@pytest.mark.parametrize(
    "op, flops",
    [
        (lambda: npu(5, 7) @ npu(7, 3), 2 * 5 * 7 * 3),
        (lambda: torch.mm(npu(5, 7), npu(7, 3), out=torch.empty(5, 3, device="npu")), 2 * 5 * 7 * 3),
        (lambda: torch.addmm(npu(3), npu(5, 7), npu(7, 3)), 2 * 5 * 7 * 3),
        (lambda: npu(5, 3).addmm_(npu(5, 7), npu(7, 3)), 2 * 5 * 7 * 3),
        (lambda: torch.bmm(npu(4, 5, 7), npu(4, 7, 3)), 2 * 4 * 5 * 7 * 3),
        (lambda: torch.bmm(npu(4, 5, 7), npu(4, 7, 3), out=torch.empty(4, 5, 3, device="npu")),
         2 * 4 * 5 * 7 * 3),
        (lambda: torch.baddbmm(npu(4, 5, 3), npu(4, 5, 7), npu(4, 7, 3)), 2 * 4 * 5 * 7 * 3),
        (lambda: npu(4, 5, 3).baddbmm_(npu(4, 5, 7), npu(4, 7, 3)), 2 * 4 * 5 * 7 * 3),
        # matmul and linear reach mm/addmm/bmm through their decompositions.
        (lambda: torch.matmul(npu(2, 4, 5, 7), npu(7, 3)), 2 * 40 * 7 * 3),
        (lambda: torch.matmul(npu(2, 4, 5, 7), npu(2, 4, 7, 3)), 2 * 8 * 5 * 7 * 3),
        (lambda: torch.nn.functional.linear(npu(6, 7), npu(3, 7), npu(3)), 2 * 6 * 7 * 3),
        # The half products' own kernel (HalfMatmul.cpp).
        (lambda: npu(5, 7, dtype=torch.half) @ npu(7, 3, dtype=torch.half), 2 * 5 * 7 * 3),
        (lambda: torch.baddbmm(npu(4, 5, 3, dtype=torch.half), npu(4, 5, 7, dtype=torch.half),
                               npu(4, 7, 3, dtype=torch.half)), 2 * 4 * 5 * 7 * 3),
        # Convolutions: 2 * batch * prod(weight) * prod(output spatial sizes).
        (lambda: torch.nn.functional.conv2d(npu(2, 3, 8, 8), npu(4, 3, 3, 3)), 2 * 2 * (4 * 3 * 9) * 36),
        (lambda: torch.nn.functional.conv1d(npu(2, 4, 10), npu(6, 2, 3), groups=2), 2 * 2 * (6 * 2 * 3) * 8),
        # Transposed: the input's spatial sizes instead (PyTorch's formula).
        (lambda: torch.nn.functional.conv_transpose2d(npu(2, 3, 5, 5), npu(3, 4, 3, 3)),
         2 * 2 * (3 * 4 * 9) * 25),
    ],
    ids=["mm", "mm_out", "addmm", "addmm_", "bmm", "bmm_out", "baddbmm", "baddbmm_", "matmul_nd_2d",
         "matmul_batched", "linear", "half_mm", "half_baddbmm", "conv2d", "conv1d_groups",
         "conv_transpose2d"],
)
def test_hand_computed_counts(counter, op, flops):
    op()
    assert counter.get_flops() == [flops, flops]


def test_uncounted_ops_and_devices(counter):
    a = npu(4, 4)
    (a + a).relu().sum()
    torch.mv(a, npu(4))  # not a counted op, as in torch_npu and FlopCounterMode
    torch.randn(4, 4) @ torch.randn(4, 4)  # CPU
    assert counter.get_flops() == [0, 0]


def test_convolution_backward(counter):
    x = npu(2, 3, 8, 8).requires_grad_()
    w = npu(4, 3, 3, 3).requires_grad_()
    y = torch.nn.functional.conv2d(x, w)
    forward = 2 * 2 * (4 * 3 * 9) * 36
    assert counter.get_flops()[0] == forward
    y.backward(torch.ones_like(y))
    # grad_input and grad_weight each cost what the forward costs.
    assert counter.get_flops() == [3 * forward, 3 * forward]
    counter.stop()
    counter.start()
    x2 = npu(2, 3, 8, 8)  # no grad_input wanted
    torch.nn.functional.conv2d(x2, w).sum().backward()
    assert counter.get_flops() == [2 * forward, 2 * forward]


def test_paused_ops_are_traversed_not_recorded(counter):
    a, b = npu(4, 8), npu(8, 2)
    a @ b
    counter.pause()
    a @ b
    a @ b
    counter.resume()
    a @ b
    one = 2 * 4 * 8 * 2
    assert counter.get_flops() == [2 * one, 4 * one]


def test_start_stop_disable_and_reset():
    c = FlopsCounter()
    c.stop()
    a = npu(3, 3)
    a @ a
    assert c.get_flops() == [0, 0]  # not started
    with c:
        a @ a
    a @ a  # __exit__ disabled the counter, and kept the count
    assert c.get_flops() == [54, 54]
    c.start()  # counts go on from there
    a @ a
    assert c.get_flops() == [108, 108]
    c.pause()
    c.stop()  # zeroes, and resumes
    c.start()
    a @ a
    assert c.get_flops() == [54, 54]
    ctx = torch_npu._C._flops_count._FlopCountContext.GetInstance()
    ctx.reset()  # reset also disables
    a @ a
    assert (ctx.recordedCount, ctx.traversedCount) == (0, 0)


def test_instances_share_the_process_counter(counter):
    other = FlopsCounter()
    a = npu(3, 3)
    a @ a
    assert other.get_flops() == counter.get_flops() == [54, 54]


def test_an_op_that_raises_is_not_counted(counter):
    with pytest.raises(RuntimeError):
        npu(3, 4) @ npu(5, 6)
    with pytest.raises(RuntimeError):
        torch.bmm(npu(2, 3, 4), npu(3, 4, 5))
    assert counter.get_flops() == [0, 0]


def test_counts_are_final_when_the_call_returns(counter, gate):
    # The stream cannot run anything: the op is counted when queued.
    a = npu(4, 4)
    with gate(torch.npu.current_stream()):
        a @ a
        assert counter.get_flops() == [128, 128]


def test_threads_add_up(counter):
    a = npu(4, 4)

    def work() -> None:
        for _ in range(50):
            a @ a

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.get_flops() == [4 * 50 * 128] * 2


def test_matches_flop_counter_mode_on_a_model(counter):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(6, 4, 3, stride=2),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 17 * 17, 10),
    ).npu()
    conv1d = torch.nn.Conv1d(4, 8, 5, groups=2).npu()
    x = npu(2, 3, 8, 8).requires_grad_()
    q = npu(2, 4, 6, 8)
    with FlopCounterMode(display=False) as mode:
        loss = model(x).sum() + conv1d(npu(2, 4, 16)).sum()
        loss = loss + torch.nn.functional.scaled_dot_product_attention(q, q, q).sum()
        loss.backward()
    assert mode.get_total_flops() > 0
    assert counter.get_flops() == [mode.get_total_flops()] * 2
