"""Generator state inside an NPU graph capture (Note [Generator state during
capture] in csrc/core/NPUGenerator.cpp).

While the current stream is captured, ``get_rng_state``/``set_rng_state``
read and move the generator's position within the graph, so saving and
restoring the state inside a captured region (activation checkpointing's
``preserve_rng_state``) repeats numbers at every replay exactly as it does
eagerly; a replay after ``manual_seed(s)`` draws what eager ops after
``manual_seed(s)`` draw, and eager ops after the replay continue where eager
ops would. Changing the seed, reseeding and the eager offset are refused
during a capture.
"""

import warnings

import pytest
import torch
import torch.utils.checkpoint

import torch_npu


def capture(fn, graph=None):
    graph = graph or torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = fn()
    return graph, out


def test_state_restored_inside_a_capture_repeats_numbers_at_every_replay():
    def restore_and_redraw():
        before = torch.rand(8, device="npu")
        state = torch.npu.get_rng_state()
        first = torch.rand(8, device="npu")
        torch.npu.set_rng_state(state)
        second = torch.rand(8, device="npu")
        return before, first, second

    torch.npu.manual_seed(123)
    eager = restore_and_redraw()
    eager_after = torch.rand(8, device="npu")

    torch.npu.manual_seed(123)
    graph, (before, first, second) = capture(restore_and_redraw)
    for replay in range(2):
        torch.npu.manual_seed(123)
        graph.replay()
        after = torch.rand(8, device="npu")
        torch.npu.synchronize()
        assert torch.equal(first, second), replay
        assert torch.equal(before.cpu(), eager[0].cpu())
        assert torch.equal(first.cpu(), eager[1].cpu())
        assert torch.equal(after.cpu(), eager_after.cpu())


def test_state_read_inside_a_capture_is_the_position_in_the_graph():
    torch.npu.manual_seed(5)
    torch.rand(4, device="npu")  # the eager position is no longer 0
    eager_state = torch.npu.get_rng_state()
    states = []

    def draws():
        states.append(torch.npu.get_rng_state())
        torch.rand(4, device="npu")
        torch.rand(4, device="npu")
        states.append(torch.npu.get_rng_state())

    capture(draws)
    seed = eager_state[:8]
    assert all(torch.equal(s[:8], seed) for s in states)
    offsets = [int.from_bytes(bytes(s[8:].tolist()), "little") for s in states]
    assert offsets == [0, 2]
    # The capture did not move the eager generator.
    assert torch.equal(torch.npu.get_rng_state(), eager_state)


def test_checkpoint_with_preserved_rng_state_in_a_capture_matches_eager():
    def fn(x):
        return torch.nn.functional.dropout(x, p=0.5) * torch.rand_like(x)

    def forward_backward():
        x = torch.ones(64, device="npu", requires_grad=True)
        y = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
        (grad,) = torch.autograd.grad(y.sum(), x)
        return y.detach(), grad

    fn(torch.ones(64, device="npu"))  # warm up outside the capture
    torch.npu.manual_seed(42)
    eager_y, eager_grad = forward_backward()
    # The recomputation drew the forward's numbers again.
    assert torch.equal(eager_grad.cpu(), eager_y.cpu())

    graph, (y, grad) = capture(forward_backward)
    torch.npu.manual_seed(42)
    graph.replay()
    torch.npu.synchronize()
    assert torch.equal(y.cpu(), eager_y.cpu())
    assert torch.equal(grad.cpu(), eager_grad.cpu())


SEED_MESSAGE = (
    "NPUGeneratorImpl::set_current_seed can be called during stream capture only if new seed is "
    "the same as the original seed."
)


def test_a_new_seed_is_refused_inside_a_capture_and_the_same_seed_accepted():
    torch.npu.manual_seed(0)
    graph = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match=SEED_MESSAGE):
        with torch.npu.graph(graph):
            torch.npu.manual_seed(1)
    torch.npu.manual_seed(1)
    other_seed_state = torch.npu.get_rng_state()
    torch.npu.manual_seed(0)
    with pytest.raises(RuntimeError, match=SEED_MESSAGE):
        with torch.npu.graph(torch.npu.NPUGraph()):
            torch.npu.set_rng_state(other_seed_state)

    # The same seed changes nothing, not even the position in the graph.
    def draws():
        a = torch.rand(8, device="npu")
        torch.npu.manual_seed(0)
        b = torch.rand(8, device="npu")
        return a, b

    graph, (a, b) = capture(draws)
    graph.replay()
    torch.npu.synchronize()
    assert not torch.equal(a.cpu(), b.cpu())
    assert torch.npu.initial_seed() == 0


def test_reseeding_and_the_eager_offset_are_refused_inside_a_capture():
    gen = torch_npu.npu.default_generators[0]
    with torch.npu.graph(torch.npu.NPUGraph()):
        with pytest.raises(RuntimeError, match="Cannot call NPUGeneratorImpl::seed while in capture mode"):
            torch.npu.seed()
        with pytest.raises(RuntimeError, match="Cannot call NPUGeneratorImpl::get_offset while in capture"):
            gen.get_offset()
        with pytest.raises(RuntimeError, match="Cannot call NPUGeneratorImpl::set_offset while in capture"):
            gen.set_offset(0)
    # Outside a capture all of them work again.
    gen.set_offset(3)
    assert gen.get_offset() == 3
    torch.npu.seed()


def test_register_generator_state_is_a_deprecated_no_op():
    generator = torch.Generator(device="npu")
    graph = torch.npu.NPUGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.inference_mode():
            graph.register_generator_state(generator)
    assert any(issubclass(w.category, DeprecationWarning) and "register_generator_state" in str(w.message)
               for w in caught)
    generator.manual_seed(0)
    with torch.npu.graph(graph):
        out = torch.rand(8, device="npu", generator=generator)
    reference = torch.rand(8, device="npu", generator=torch.Generator(device="npu").manual_seed(0))
    generator.manual_seed(0)
    graph.replay()
    torch.npu.synchronize()
    assert torch.equal(out.cpu(), reference.cpu())
