"""Host syncs of the op path: the sync debug mode and the per-op counter.

See Note [Host syncs of the op path] (csrc/core/HostSync.h). An op that can
run asynchronously must never make the host wait; the ops that must (host
reads, data-dependent output shapes) are counted and, on request, warned
about or refused before they queue anything.
"""

import warnings

import pytest
import torch
import torch_npu


@pytest.fixture(autouse=True)
def _default_mode():
    torch_npu.npu.set_sync_debug_mode("default")
    torch_npu.npu.reset_host_sync_stats()
    yield
    torch_npu.npu.set_sync_debug_mode("default")


def test_mode_set_get_and_torch_npu_texts():
    assert torch_npu.npu.get_sync_debug_mode() == 0
    torch_npu.npu.set_sync_debug_mode(1)
    assert torch.npu.get_sync_debug_mode() == 1
    torch_npu.npu.set_sync_debug_mode("error")
    assert torch_npu.npu.get_sync_debug_mode() == 2
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of 0,1,2"):
        torch_npu.npu.set_sync_debug_mode(3)
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of 0,1,2"):
        torch_npu.npu.set_sync_debug_mode(-1)
    assert torch_npu.npu.get_sync_debug_mode() == 2, "a refused value leaves the mode unchanged"
    with pytest.raises(
        RuntimeError, match="invalid value of debug_mode, expected one of `default`, `warn`, `error`"
    ):
        torch_npu.npu.set_sync_debug_mode("unexpected")
    with pytest.raises(TypeError, match="debug_mode must be an int or a str, got float"):
        torch_npu.npu.set_sync_debug_mode(1.0)


def test_asynchronous_ops_make_no_host_sync():
    x = torch.randn(8, 8, device="npu")
    w = torch.randn(8, 8, device="npu", requires_grad=True)
    torch_npu.npu.reset_host_sync_stats()
    y = torch.relu(x @ w).softmax(-1).sum(0) + 1
    y.sum().backward()
    z = x.view(64)[3:10].clone().mul_(2)
    torch.npu.synchronize()  # explicit: asked for, not counted
    torch.npu.current_stream().synchronize()
    del y, z
    assert torch_npu.npu.host_sync_stats() == {}
    assert torch_npu.npu.host_sync_count() == 0


def test_each_host_sync_is_counted_per_op():
    x = torch.tensor([0.0, 1.0, 2.0, 0.0], device="npu")  # counted: blocking copy from cpu
    torch_npu.npu.reset_host_sync_stats()
    torch.nonzero(x)
    torch.nonzero(x)
    x.sum().item()
    x.cpu()
    assert torch_npu.npu.host_sync_stats() == {
        "aten::nonzero": 2,
        "aten::_local_scalar_dense": 1,
        "aten::copy_ (npu to cpu)": 1,
    }
    assert torch_npu.npu.host_sync_count() == 4
    torch_npu.npu.reset_host_sync_stats()
    assert torch_npu.npu.host_sync_count() == 0


def test_non_blocking_copy_with_pinned_memory_is_not_a_sync():
    src = torch.arange(16.0).pin_memory()
    torch_npu.npu.reset_host_sync_stats()
    dst = src.to("npu", non_blocking=True)
    back = torch.empty(16).pin_memory()
    back.copy_(dst, non_blocking=True)
    assert torch_npu.npu.host_sync_count() == 0
    torch.npu.current_stream().synchronize()
    assert torch.equal(back, src)


def test_warn_mode_warns_with_the_op_name():
    x = torch.tensor([0.0, 3.0], device="npu")
    torch_npu.npu.set_sync_debug_mode("warn")
    with pytest.warns(UserWarning, match="called a synchronizing NPU operation: aten::nonzero"):
        idx = torch.nonzero(x)
    torch_npu.npu.set_sync_debug_mode("default")
    assert idx.cpu().tolist() == [[1]]


def test_error_mode_refuses_before_anything_is_queued():
    x = torch.tensor([0.0, 3.0, 5.0], device="npu")
    out = torch.zeros(3, device="npu")
    torch_npu.npu.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="called a synchronizing NPU operation: aten::nonzero"):
        torch.nonzero(x)
    with pytest.raises(RuntimeError, match=r"called a synchronizing NPU operation: aten::copy_ \(npu to cpu\)"):
        x.cpu()
    with pytest.raises(RuntimeError, match="aten::_local_scalar_dense"):
        x[1].item()
    torch.add(x, 1, out=out)  # asynchronous: allowed in error mode
    torch_npu.npu.set_sync_debug_mode("default")
    # The refusals left the stream and the tensors as they were.
    torch.npu.current_stream().synchronize()
    assert out.cpu().tolist() == [1.0, 4.0, 6.0]
    assert torch.nonzero(x).cpu().flatten().tolist() == [1, 2]


def test_error_mode_counts_the_refused_sync():
    x = torch.ones(2, device="npu")
    torch_npu.npu.set_sync_debug_mode(2)
    with pytest.raises(RuntimeError):
        x.cpu()
    torch_npu.npu.set_sync_debug_mode(0)
    assert torch_npu.npu.host_sync_stats() == {"aten::copy_ (npu to cpu)": 1}
