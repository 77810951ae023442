"""SyncBatchNorm's kernels on npu tensors (csrc/aten/SyncBatchNorm.cpp, Note
[SyncBatchNorm kernels]): batch_norm_stats, batch_norm_gather_stats(_with_counts),
batch_norm_elemt (+ out), batch_norm_backward_reduce and batch_norm_backward_elemt
against CUDA's definitions written out here in float64 on the CPU, in float32,
float64, half and channels-last; their bad arguments raise at the call.

torch.nn.SyncBatchNorm training with the "hccl" process group against
BatchNorm on the full batch is checked by 2 ranks in dist_workers.py
(check_sync_batchnorm, run by test_distributed.py)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch_npu

TOL = dict(rtol=1e-5, atol=1e-5)


def _dims(x: torch.Tensor) -> list:
    return [0] + list(range(2, x.dim()))


def _bc(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.reshape([1, -1] + [1] * (x.dim() - 2))


def _ref_stats(x: torch.Tensor, eps: float):
    x = x.double()
    mean = x.mean(_dims(x))
    var = x.var(_dims(x), unbiased=False)
    return mean, 1 / torch.sqrt(var + eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 7), (2, 5, 4, 3), (2, 3, 2, 3, 4)])
def test_stats_and_elemt_match_the_definitions(dtype, shape):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 3 + 1).to(dtype)
    mean, invstd = torch.batch_norm_stats(x.npu(), 1e-5)
    # CUDA's accumulate type: float statistics for half input.
    assert mean.dtype == invstd.dtype == (torch.float32 if dtype == torch.float16 else dtype)
    ref_mean, ref_invstd = _ref_stats(x, 1e-5)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float16 else TOL
    torch.testing.assert_close(mean.cpu().double(), ref_mean, **tol)
    torch.testing.assert_close(invstd.cpu().double(), ref_invstd, **tol)

    w, b = torch.randn(shape[1]), torch.randn(shape[1])
    y = torch.batch_norm_elemt(x.npu(), w.npu(), b.npu(), mean, invstd, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    ref = (x.double() - _bc(ref_mean, x)) * _bc(ref_invstd * w.double(), x) + _bc(b.double(), x)
    torch.testing.assert_close(y.cpu().double(), ref, **tol)
    # No weight and bias: the normalised input alone.
    y = torch.batch_norm_elemt(x.npu(), None, None, mean, invstd, 1e-5)
    torch.testing.assert_close(
        y.cpu().double(), (x.double() - _bc(ref_mean, x)) * _bc(ref_invstd, x), **tol)


def test_elemt_out_and_channels_last():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 5).npu().contiguous(memory_format=torch.channels_last)
    mean, invstd = torch.batch_norm_stats(x, 1e-3)
    y = torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-3)
    assert y.is_contiguous(memory_format=torch.channels_last)  # CUDA's layout
    out = torch.empty(2, 3, 4, 5, device="npu")
    ret = torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-3, out=out)
    assert ret is out
    ref = torch.nn.functional.batch_norm(x.cpu(), None, None, training=True, eps=1e-3)
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    torch.testing.assert_close(y.cpu(), ref, **TOL)


def test_stats_invstd_is_zero_for_a_constant_channel_without_eps():
    # CUDA's InvStd: 0 where var and eps are both 0, not inf.
    x = torch.ones(4, 2, 3, device="npu")
    x[:, 1] = torch.arange(12.0, device="npu").reshape(4, 3)
    _, invstd = torch.batch_norm_stats(x, 0.0)
    assert invstd[0].item() == 0.0
    assert invstd[1].item() == pytest.approx(1 / torch.arange(12.0).var(unbiased=False).sqrt().item())


def test_gather_stats_combines_ranks_like_the_full_batch():
    torch.manual_seed(2)
    parts = [torch.randn(n, 3, 4) * (i + 1) + i for i, n in enumerate((2, 5, 3))]
    stats = [torch.batch_norm_stats(p.npu(), 1e-5) for p in parts]
    mean_all = torch.stack([m for m, _ in stats])
    invstd_all = torch.stack([s for _, s in stats])
    counts = torch.tensor([float(p.numel() // p.size(1)) for p in parts], device="npu")
    running_mean, running_var = torch.zeros(3, device="npu"), torch.ones(3, device="npu")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        parts[0].npu(), mean_all, invstd_all, running_mean, running_var, 0.1, 1e-5, counts)
    full = torch.cat(parts).double()
    ref_mean, ref_invstd = _ref_stats(full, 1e-5)
    torch.testing.assert_close(mean.cpu().double(), ref_mean, **TOL)
    torch.testing.assert_close(invstd.cpu().double(), ref_invstd, **TOL)
    # Running statistics: momentum toward the mean and the unbiased variance.
    torch.testing.assert_close(running_mean.cpu().double(), 0.1 * ref_mean, **TOL)
    unbiased = full.var(_dims(full), unbiased=True)
    torch.testing.assert_close(running_var.cpu().double(), 0.9 + 0.1 * unbiased, **TOL)


def test_gather_stats_skips_ranks_with_an_empty_input():
    mean_all = torch.tensor([[1.0, 2.0], [0.0, 0.0]], device="npu")
    invstd_all = torch.tensor([[0.5, 0.25], [0.0, 0.0]], device="npu")  # rank 1 had no data
    counts = torch.tensor([4.0, 0.0], device="npu")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        mean_all, mean_all, invstd_all, None, None, 0.1, 0.0, counts)
    assert mean.cpu().tolist() == [1.0, 2.0]
    torch.testing.assert_close(invstd.cpu(), torch.tensor([0.5, 0.25]))


def test_gather_stats_with_one_count_for_every_rank():
    # torch_npu's test_batch_norm_gather_stats.
    mean, invstd = torch.batch_norm_gather_stats(
        torch.randn(1, 3, 3, 3, device="npu"), mean=torch.ones(2, 3, device="npu"),
        invstd=torch.ones(2, 3, device="npu"), running_mean=None, running_var=None,
        momentum=0.1, eps=1e-5, count=2)
    torch.testing.assert_close(mean.cpu(), torch.ones(3))
    torch.testing.assert_close(invstd.cpu(), torch.ones(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_backward_kernels_give_batch_norms_gradients(dtype):
    torch.manual_seed(3)
    x = torch.randn(4, 3, 5, dtype=torch.float64)
    w, b = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    dy = torch.randn(4, 3, 5, dtype=torch.float64)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    torch.nn.functional.batch_norm(xr, None, None, wr, br, training=True, eps=1e-5).backward(dy)

    xn, dyn = x.to(dtype).npu(), dy.to(dtype).npu()
    mean, invstd = torch.batch_norm_stats(xn, 1e-5)
    wn = w.to(mean.dtype).npu()
    sum_dy, sum_dy_xmu, grad_w, grad_b = torch.batch_norm_backward_reduce(
        dyn, xn, mean, invstd, wn, True, True, True)
    count = torch.tensor([x.numel() // x.size(1)], dtype=torch.int32, device="npu")
    grad_x = torch.batch_norm_backward_elemt(dyn, xn, mean, invstd, wn, sum_dy, sum_dy_xmu, count)
    assert grad_x.dtype == dtype and sum_dy.dtype == mean.dtype
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else TOL
    torch.testing.assert_close(grad_x.cpu().double(), xr.grad, **tol)
    torch.testing.assert_close(grad_w.cpu().double(), wr.grad, **tol)
    torch.testing.assert_close(grad_b.cpu().double(), br.grad, **tol)
    torch.testing.assert_close(sum_dy.cpu().double(), dy.sum((0, 2)), **tol)


def test_backward_reduce_leaves_out_what_is_not_wanted():
    x = torch.randn(2, 3, 4, device="npu")
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    w = torch.ones(3, device="npu")
    sum_dy, sum_dy_xmu, grad_w, grad_b = torch.batch_norm_backward_reduce(
        x, x, mean, invstd, w, False, True, False)
    assert sum_dy is None and sum_dy_xmu is None and grad_b is None
    full = torch.batch_norm_backward_reduce(x, x, mean, invstd, w, True, True, True)
    torch.testing.assert_close(grad_w.cpu(), full[2].cpu())


def test_ops_are_queued_on_the_current_stream(gate):
    x = torch.randn(8, 3, 4, device="npu")
    s = torch.npu.Stream()
    torch.npu.synchronize()
    g = gate(s)
    with torch.npu.stream(s):
        mean, invstd = torch.batch_norm_stats(x, 1e-5)
        y = torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-5)
        done = torch.npu.Event()
        done.record()
    assert not done.query()  # queued behind the gate, not run on this thread
    g.release()
    done.synchronize()
    ref = torch.nn.functional.batch_norm(x.cpu(), None, None, training=True, eps=1e-5)
    torch.testing.assert_close(y.cpu(), ref, **TOL)


@pytest.mark.parametrize("call, message", [
    (lambda x: torch.batch_norm_stats(x[0, 0], 1e-5),
     r"batch_norm_stats: expected input of at least 2 dimensions \(N, C, \.\.\.\), but got a tensor of shape \[4\]"),
    (lambda x: torch.batch_norm_stats(x.long(), 1e-5),
     r"batch_norm_stats: expected a floating input, but got Long"),
    (lambda x: torch.batch_norm_elemt(x, None, None, torch.zeros(2, device="npu"),
                                      torch.ones(3, device="npu"), 1e-5),
     r"batch_norm_elemt: expected mean of shape \[3\], but got \[2\]"),
    (lambda x: torch.batch_norm_elemt(x, torch.ones(3), None, torch.zeros(3, device="npu"),
                                      torch.ones(3, device="npu"), 1e-5),
     r"Expected all tensors to be on the same device"),
    (lambda x: torch.batch_norm_gather_stats_with_counts(
        x, torch.zeros(2, 3, device="npu"), torch.ones(2, 3, device="npu"), None, None, 0.1, 1e-5,
        torch.ones(3, device="npu")),
     r"batch_norm_gather_stats_with_counts: expected one count per row of mean \(2\), but got counts of shape \[3\]"),
    (lambda x: torch.batch_norm_gather_stats_with_counts(
        x, torch.zeros(3, device="npu"), torch.ones(3, device="npu"), None, None, 0.1, 1e-5,
        torch.ones(1, device="npu")),
     r"expected mean of shape \[world_size, channels\], but got \[3\]"),
    (lambda x: torch.batch_norm_gather_stats_with_counts(
        x, torch.zeros(2, 3, device="npu"), torch.ones(2, 3, device="npu"),
        torch.zeros(4, device="npu"), None, 0.1, 1e-5, torch.ones(2, device="npu")),
     r"expected running_mean of shape \[3\], but got \[4\]"),
    (lambda x: torch.batch_norm_backward_reduce(
        x[:1], x, torch.zeros(3, device="npu"), torch.ones(3, device="npu"), None, True, False, False),
     r"batch_norm_backward_reduce: expected grad_out of the shape of input \(\[2, 3, 4\]\), but got \[1, 3, 4\]"),
    (lambda x: torch.batch_norm_backward_elemt(
        x, x, torch.zeros(3, device="npu"), torch.ones(3, device="npu"), None,
        torch.zeros(3, device="npu"), torch.zeros(3, device="npu"),
        torch.ones(1, dtype=torch.bool, device="npu")),
     r"batch_norm_backward_elemt: expected a count tensor of a real dtype, but got Bool"),
])
def test_bad_arguments_raise_at_the_call(call, message):
    x = torch.randn(2, 3, 4, device="npu")
    with pytest.raises(RuntimeError, match=message):
        call(x)
    torch.npu.synchronize()  # nothing failed on the stream


def test_convert_sync_batchnorm_keeps_the_parameters_and_buffers():
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 1), torch.nn.BatchNorm2d(3),
                                torch.nn.Sequential(torch.nn.BatchNorm1d(3))).npu()
    model[1].running_mean.fill_(0.5)
    converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)
    assert isinstance(converted[2][0], torch.nn.SyncBatchNorm)
    assert converted[1].weight.device.type == "npu"
    assert converted[1].running_mean.cpu().tolist() == [0.5] * 3


def test_sync_batchnorm_without_a_process_group_is_batchnorm():
    # PyTorch's rule: no initialised group, nothing to synchronise with.
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    torch.manual_seed(5)
    layer = torch.nn.SyncBatchNorm(3)
    ref = torch.nn.BatchNorm1d(3)
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(4, 3, 2)
    torch.testing.assert_close(layer.npu()(x.npu()).cpu(), ref(x), **TOL)
    torch.testing.assert_close(layer.running_var.cpu(), ref.running_var, **TOL)


def test_torch_npu_syncbatchnorm_function_is_exported():
    from torch_npu.utils.syncbatchnorm import SyncBatchNorm

    assert issubclass(SyncBatchNorm, torch.autograd.Function)
