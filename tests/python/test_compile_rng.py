"""Random ops in torch.compile's recomputed regions on npu (torch_npu/utils/_inductor.py).

AOTAutograd recomputes a checkpointed region in the backward pass and, to give
its random ops the forward's numbers, wraps them in the higher-order ops
``run_and_save_rng_state`` / ``run_with_rng_state``, which PyTorch implements
for cpu, cuda, hpu and xpu only. These tests check the npu implementations:
directly, and through a checkpointed dropout whose gradient is only right if
the backward's recomputed mask is the forward's.
"""
import pytest
import torch
import torch.nn.functional as F
import torch_npu
from torch.utils.checkpoint import checkpoint

import torch._dynamo  # noqa: E402
from torch._prims import rng_prims  # noqa: E402

npu = torch_npu.npu
rand = torch.ops.aten.rand.default


def test_run_with_rng_state_replays_the_saved_numbers_and_restores_the_generator():
    npu.manual_seed(7)
    state, first = rng_prims.run_and_save_rng_state(rand, [64], device="npu")
    assert first.device.type == "npu"
    after_first = torch.rand(64, device="npu")  # the generator moved on past `first`
    npu.manual_seed(7)
    torch.rand(64, device="npu")
    expected_after = torch.rand(64, device="npu")
    assert torch.equal(after_first.cpu(), expected_after.cpu())

    before_replay = npu.get_rng_state()
    again = rng_prims.run_with_rng_state(state, rand, [64], device="npu")
    assert torch.equal(again.cpu(), first.cpu())
    assert torch.equal(npu.get_rng_state(), before_replay)  # the replay left no trace


def test_the_state_is_the_generator_of_the_ops_device():
    if npu.device_count() < 2:
        pytest.skip("needs two simulated devices")
    npu.manual_seed_all(3)
    torch.rand(16, device="npu:0")  # device 0's generator moves, device 1's does not
    before = npu.get_rng_state(1)
    state, first = rng_prims.run_and_save_rng_state(rand, [16], device="npu:1")
    assert first.device == torch.device("npu:1")
    assert torch.equal(state, before)
    with npu.device(0):  # the current device does not decide it
        again = rng_prims.run_with_rng_state(state, rand, [16], device="npu:1")
    assert torch.equal(again.cpu(), first.cpu())


def test_a_tensor_argument_decides_the_device():
    x = torch.ones(32, device="npu")
    state, first = rng_prims.run_and_save_rng_state(torch.ops.aten.bernoulli.p, x, 0.5)
    again = rng_prims.run_with_rng_state(state, torch.ops.aten.bernoulli.p, x, 0.5)
    assert torch.equal(again.cpu(), first.cpu())


def test_cpu_keeps_pytorchs_kernels():
    torch.manual_seed(5)
    state, first = rng_prims.run_and_save_rng_state(rand, [8], device="cpu")
    assert torch.equal(state, torch.random.get_rng_state()) is False  # rand moved it on
    again = rng_prims.run_with_rng_state(state, rand, [8], device="cpu")
    assert torch.equal(again, first)


def test_checkpointed_dropout_recomputes_the_forwards_mask():
    torch._dynamo.reset()
    x = torch.randn(4096, device="npu", requires_grad=True)

    def region(y: torch.Tensor) -> torch.Tensor:
        return F.dropout(y.sin(), 0.5, training=True) * 3

    out = torch.compile(lambda t: checkpoint(region, t, use_reentrant=False), backend="aot_eager")(x)
    out.sum().backward()
    kept = out != 0  # the forward's mask
    assert 0.3 < kept.float().mean().item() < 0.7
    expected = torch.where(kept, 6 * torch.cos(x.detach()), torch.zeros_like(x))
    torch.testing.assert_close(x.grad, expected)
    torch._dynamo.reset()
