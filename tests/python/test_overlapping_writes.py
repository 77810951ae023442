"""Ops that write through overlapping memory behave as on CPU, at the call
(Note [Writes through overlapping tensors run synchronously] in
csrc/aten/SynchronousOp.cpp, Note [Aliases of one storage share one storage]
in csrc/core/CPUAlias.h): an expanded tensor as an output, or an output that
partly overlaps an input, raises CPU's "unsupported operation" error where
CPU raises it, and runs where CPU runs it (fill_, zero_, index_put_), never
as a later stream failure and never with a silently wrong result."""

import pytest
import torch

import torch_npu

INTERNAL = "more than one element of the written-to tensor refers to a single memory location"
PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory location"


def expanded(device):
    return torch.arange(3.0).reshape(1, 3).to(device).expand(6, 3)


def line(device):
    return torch.arange(6.0, device=device)


def square(device):
    return torch.arange(16.0).reshape(4, 4).to(device)


CASES = {
    "cat out=expanded": lambda d: torch.cat([square(d)[:3, :3]] * 2, out=expanded(d)),
    "add_ on expanded": lambda d: expanded(d).add_(1),
    "add out=expanded": lambda d: torch.add(torch.ones(6, 3, device=d), 1, out=expanded(d)),
    "index_select out=expanded": lambda d: torch.index_select(
        torch.ones(6, 3, device=d), 0, torch.arange(6, device=d), out=expanded(d)),
    "copy_ into expanded": lambda d: expanded(d).copy_(torch.ones(6, 3, device=d)),
    "copy_ from cpu into expanded": lambda d: expanded(d).copy_(torch.ones(6, 3)),
    "copy_ partial": lambda d: (lambda z: z[1:].copy_(z[:-1]))(line(d)),
    "add out partial": lambda d: (lambda z: torch.add(z[:-1], 1, out=z[1:]))(line(d)),
    "add_ partial": lambda d: (lambda z: z[1:].add_(z[:-1]))(line(d)),
    "add_ transposed self": lambda d: (lambda a: a.add_(a.t()))(square(d)),
    "mul_ on expanded": lambda d: expanded(d).mul_(2),
    # Accepted by CPU, so accepted here, with CPU's result.
    "fill_ on expanded": lambda d: expanded(d).fill_(2),
    "zero_ on expanded": lambda d: expanded(d).zero_(),
    "zeros out=expanded": lambda d: torch.zeros(6, 3, out=expanded(d)),
    "index_put_ partial": lambda d: (lambda z: z[1:].index_put_((torch.tensor([0], device=d),), z[:1]))(line(d)),
    "unsqueeze_ on expanded": lambda d: expanded(d).unsqueeze_(0),
    "add_ of itself": lambda d: (lambda z: z.add_(z))(line(d)),
    "mm out=input": lambda d: (lambda a: torch.mm(a, a, out=a))(square(d)),
}


def outcome(fn, device):
    try:
        result = fn(device)
    except RuntimeError as e:
        return "error", str(e).split("\n")[0]
    return "value", result.cpu()


@pytest.mark.parametrize("name", sorted(CASES))
def test_npu_does_what_cpu_does_at_the_call(name):
    kind_cpu, cpu = outcome(CASES[name], "cpu")
    kind_npu, npu = outcome(CASES[name], "npu")
    assert kind_npu == kind_cpu, (cpu, npu)
    if kind_cpu == "error":
        assert INTERNAL in cpu or PARTIAL in cpu
        assert npu.startswith(cpu.split(" Please")[0]), npu
    else:
        assert torch.equal(npu, cpu)
    # Nothing was left to fail the stream later.
    torch.npu.synchronize()
    assert torch.ones(4, device="npu").sum().item() == 4


def test_overlapping_writes_are_counted_as_host_syncs_and_dense_ones_are_not():
    torch_npu.npu.reset_host_sync_stats()
    x = torch.ones(6, 3, device="npu")
    x.add_(1)
    torch.add(x, 1, out=x)
    assert torch_npu.npu.host_sync_count() == 0
    expanded("npu").fill_(3)
    assert torch_npu.npu.host_sync_stats().get("aten::fill_") == 1
