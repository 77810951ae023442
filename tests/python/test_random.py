"""Random numbers on npu: manual_seed / manual_seed_all / seed / initial_seed /
get_rng_state / set_rng_state (and the *_all forms); the same seed gives the
same numbers, a restored state reproduces them, devices have independent
generators, explicit generators work, and numbers do not depend on which
stream an op is queued on."""

import pytest
import torch


def draw(device="npu"):
    return torch.randn(100, device=device).cpu()


def test_manual_seed_reproduces():
    torch.npu.manual_seed(123)
    a = draw()
    torch.npu.manual_seed(123)
    b = draw()
    torch.npu.manual_seed(124)
    c = draw()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.npu.initial_seed() == 124


def test_consecutive_draws_differ():
    torch.npu.manual_seed(0)
    assert not torch.equal(draw(), draw())


def test_rng_state_restore_reproduces():
    torch.npu.manual_seed(7)
    draw()
    state = torch.npu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = draw()
    b = torch.rand(10, device="npu").cpu()
    torch.npu.set_rng_state(state)
    assert torch.equal(draw(), a)
    assert torch.equal(torch.rand(10, device="npu").cpu(), b)


def test_get_rng_state_is_a_copy():
    torch.npu.manual_seed(1)
    state = torch.npu.get_rng_state()
    saved = state.clone()
    draw()
    assert torch.equal(state, saved)


def test_manual_seed_is_per_device():
    torch.npu.manual_seed_all(5)
    a0 = draw("npu:0")
    torch.npu.manual_seed_all(5)
    a1 = draw("npu:1")
    assert torch.equal(a0, a1)
    with torch.npu.device(1):
        torch.npu.manual_seed(9)
        assert torch.npu.initial_seed() == 9
    assert torch.npu.initial_seed() == 5


def test_rng_state_per_device_and_all():
    torch.npu.manual_seed_all(11)
    states = torch.npu.get_rng_state_all()
    assert len(states) == 2
    a = [draw("npu:0"), draw("npu:1")]
    torch.npu.set_rng_state_all(states)
    assert torch.equal(draw("npu:0"), a[0])
    assert torch.equal(draw("npu:1"), a[1])
    torch.npu.set_rng_state(states[1], device=1)
    assert torch.equal(draw("npu:1"), a[1])
    assert torch.equal(torch.npu.get_rng_state("npu:1"), torch.npu.get_rng_state(1))


def test_seed_randomizes():
    torch.npu.seed()
    s1 = torch.npu.initial_seed()
    torch.npu.seed()
    s2 = torch.npu.initial_seed()
    assert s1 != s2
    torch.npu.seed_all()
    assert torch.npu.default_generators[0].initial_seed() == torch.npu.default_generators[1].initial_seed()


def test_npu_generator_is_independent_of_cpu():
    torch.manual_seed(3)
    torch.npu.manual_seed(3)
    c1 = torch.randn(10)
    n1 = draw()
    torch.manual_seed(3)
    torch.randn(50)  # advances only the cpu generator
    torch.npu.manual_seed(3)
    assert torch.equal(draw(), n1)
    assert not torch.equal(torch.randn(10), c1)


def test_torch_manual_seed_seeds_npu_too():
    torch.manual_seed(42)
    a = draw()
    torch.manual_seed(42)
    assert torch.equal(draw(), a)


def test_explicit_generator():
    g = torch.Generator(device="npu")
    g.manual_seed(10)
    a = torch.randn(50, device="npu", generator=g).cpu()
    g.manual_seed(10)
    b = torch.randn(50, device="npu", generator=g).cpu()
    assert torch.equal(a, b)
    assert g.device.type == "npu"


def test_numbers_reserved_at_enqueue_not_run(gate):
    # A random op queued on a blocked stream gets its numbers when queued:
    # the same calls in the same order give the same numbers, whichever
    # stream runs first.
    s = torch.npu.Stream()
    torch.npu.manual_seed(99)
    g = gate(s)
    with torch.npu.stream(s):
        a = torch.randn(64, device="npu")
    b = torch.randn(64, device="npu")  # runs before a
    b_cpu = b.cpu()
    g.release()
    s.synchronize()
    torch.npu.manual_seed(99)
    a2 = torch.randn(64, device="npu")
    b2 = torch.randn(64, device="npu")
    assert torch.equal(a.cpu(), a2.cpu())
    assert torch.equal(b_cpu, b2.cpu())


@pytest.mark.parametrize("fn", [
    lambda: torch.rand(20, device="npu"),
    lambda: torch.randint(0, 100, (20,), device="npu"),
    lambda: torch.randperm(20, device="npu"),
    lambda: torch.empty(20, device="npu").uniform_(-1, 1),
    lambda: torch.empty(20, device="npu").normal_(),
    lambda: torch.bernoulli(torch.full((20,), 0.5, device="npu")),
    lambda: torch.multinomial(torch.ones(20, device="npu"), 5),
    lambda: torch.nn.functional.dropout(torch.ones(20, device="npu"), 0.5),
])
def test_random_ops_reproducible(fn):
    torch.npu.manual_seed(2024)
    a = fn().cpu()
    torch.npu.manual_seed(2024)
    b = fn().cpu()
    assert torch.equal(a, b)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activation_checkpointing_recomputes_the_same_random_numbers(use_reentrant):
    # PyTorch saves the npu random state for the recomputation only if
    # torch.npu._initialized says the device is in use.
    import torch.utils.checkpoint

    def fn(x):
        return torch.nn.functional.dropout(x, p=0.5) * torch.rand_like(x)

    torch.ones(1, device="npu")
    assert torch.npu._initialized is True
    torch.npu.manual_seed(42)
    x = torch.ones(256, device="npu", requires_grad=True)
    y = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=use_reentrant, preserve_rng_state=True)
    y.sum().backward()
    # d(sum(x * mask * 2 * r))/dx is mask * 2 * r: y itself, when the
    # recomputation drew the forward's numbers again.
    assert torch.equal(x.grad.cpu(), y.detach().cpu())
    assert y.count_nonzero() > 0
