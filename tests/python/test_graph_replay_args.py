"""What a replayed op task prepares once (Note [Replayed op tasks build their
arguments once] in csrc/aten/ReplayArgs.h) must not change what it computes:
ops with Python numbers (wrapped numbers, promoted once for pointwise ops)
give CPU's bits at every replay, inputs held by reference are followed when
their storage gets new memory, and task-group updates are prepared the same
way and seen by the next replay.
"""
import pytest
import torch
import torch_npu

npu = torch_npu.npu


def _capture(fn):
    g = npu.NPUGraph()
    with npu.graph(g):
        out = fn()
    return g, out


def _same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


# (name, dtype, op on a tensor returning a tensor, input values)
# Each op gets a Python number: a wrapped number on the op path. Some are
# promoted once at capture (float/complex inputs, exact integers), some must
# not be (a double input keeps its double number; an integer that int32 cannot
# hold stays int64, so that true division sees 2**40, not 0; a float number
# with an integer tensor or a complex one with a float tensor promote the
# result).
CASES = [
    ("mul_ f32 inexact", torch.float32, lambda x: x.mul_(1.0001), [1.5, -2.25, 3.0]),
    ("add_ f32 alpha", torch.float32, lambda x: x.add_(0.1, alpha=3), [1.0, 2.0, 3.0]),
    ("sub f32 int", torch.float32, lambda x: x - 3, [1.0, 2.0, 3.0]),
    ("rsub f32", torch.float32, lambda x: 1.0001 - x, [0.5, 2.0, -1.0]),
    ("div_ f64 inexact", torch.float64, lambda x: x.div_(1.0001), [1.0, 2.0, 3.0]),
    ("mul f16", torch.float16, lambda x: x * 1.0001, [1.0, 2.5, 3.0]),
    ("add bf16", torch.bfloat16, lambda x: x + 0.1, [1.0, 2.5, 3.0]),
    ("mul c64 by a float", torch.complex64, lambda x: x * 1.0001, [1 + 1j, 2 - 1j, 0.5j]),
    ("mul f32 by a complex", torch.float32, lambda x: x * (1 + 2j), [1.0, 2.0, 3.0]),
    ("div i32 by 2**40", torch.int32, lambda x: x / 2**40, [1, 2**20, -7]),
    ("div i32 by 3", torch.int32, lambda x: x / 3, [1, 10, -7]),
    ("add_ i8 wraps 300", torch.int8, lambda x: x.add_(300), [1, 2, -3]),
    ("mul i32 by a float", torch.int32, lambda x: x * 2.5, [1, 2, 3]),
    ("floordiv f32", torch.float32, lambda x: x // 0.3, [1.0, 2.0, -3.0]),
    ("remainder f32", torch.float32, lambda x: x % 0.3, [1.0, 2.0, -3.0]),
    ("and bool", torch.bool, lambda x: x & True, [True, False, True]),
    ("lshift i64", torch.int64, lambda x: x << 3, [1, 2, 3]),
    ("eq f32", torch.float32, lambda x: x == 1.0001, [1.0001, 1.0, 2.0]),
]


@pytest.mark.parametrize("name,dtype,op,values", CASES, ids=[c[0] for c in CASES])
def test_replayed_ops_with_python_numbers_give_cpus_bits(name, dtype, op, values):
    x = torch.tensor(values, dtype=dtype, device="npu")  # held by reference (other stream)
    g, out = _capture(lambda: op(x))
    for step in range(3):
        new = torch.tensor(values, dtype=dtype) * (step + 1) if dtype != torch.bool else \
            torch.tensor(values, dtype=dtype) ^ bool(step % 2)
        x.copy_(new)
        expected = op(new.clone())
        g.replay()
        _same_bits(out, expected)


def test_out_variant_with_a_python_number_gives_cpus_bits():
    x = torch.tensor([1.5, -2.25, 3.0], device="npu")
    y = torch.zeros(3, device="npu")
    g, _ = _capture(lambda: torch.mul(x, 1.0001, out=y))
    for v in (1.0, 7.0):
        x.fill_(v)
        g.replay()
        _same_bits(y, torch.full((3,), v) * 1.0001)


def test_replay_reads_the_new_memory_of_a_held_input():
    x = torch.ones(256, device="npu")
    y = torch.zeros(256, device="npu")
    g, _ = _capture(lambda: y.add_(x))
    g.replay()
    assert y.cpu().tolist() == [1.0] * 256
    # x's storage gets new memory; its old block goes back to the cache and is
    # likely taken by the next allocation of its size, filled with a sentinel.
    x.resize_(1 << 16)
    x.fill_(2.0)
    sentinel = torch.full((256,), 100.0, device="npu")
    y.zero_()
    g.replay()
    assert y.cpu().tolist() == [2.0] * 256
    assert sentinel.cpu().tolist() == [100.0] * 256


def test_a_task_group_update_is_prepared_and_seen_by_the_next_replay():
    x = torch.tensor([1.5, -2.25, 3.0, 4.0], device="npu")  # held by reference
    y = torch.zeros(4, device="npu")
    g = npu.NPUGraph()
    with npu.graph(g):
        stream = npu.current_stream()
        npu.graph_task_group_begin(stream)
        torch.mul(x, 1.0001, out=y)
        y.add_(0.1)
        handle = npu.graph_task_group_end(stream)
    g.replay()
    cpu_x = x.cpu()
    _same_bits(y, (cpu_x * 1.0001).add_(0.1))
    update_stream = npu.Stream()
    for scale, shift in ((3.0001, 0.7), (-0.5, 1e-3)):
        with npu.stream(update_stream):
            npu.graph_task_update_begin(update_stream, handle)
            torch.mul(x, scale, out=y)
            y.add_(shift)
            npu.graph_task_update_end(update_stream)
        npu.synchronize()
        g.replay()
        _same_bits(y, (cpu_x * scale).add_(shift))
    x.fill_(2.0)
    g.replay()
    _same_bits(y, (torch.full((4,), 2.0) * -0.5).add_(1e-3))
