"""Automatic mixed precision on npu: torch.autocast("npu"), torch.npu.amp, GradScaler.

See Note [Autocast on npu] (csrc/aten/Autocast.cpp): CUDA's op lists and
policies, registered for the AutocastPrivateUse1 key.
"""

import pytest
import torch
import torch_npu


def test_autocast_policies_follow_cuda_lists():
    a = torch.randn(4, 4, device="npu")
    b = torch.randn(4, 4, device="npu")
    w = torch.randn(3, 2, 3, 3, device="npu")
    img = torch.randn(1, 2, 5, 5, device="npu")
    with torch.autocast("npu"):
        assert torch.npu.is_autocast_enabled()
        assert (a @ b).dtype == torch.float16  # lower precision: matmul family
        assert torch.nn.functional.linear(a, b).dtype == torch.float16
        assert torch.nn.functional.conv2d(img, w).dtype == torch.float16
        half = (a @ b)
        assert torch.exp(half).dtype == torch.float32  # fp32 list
        assert torch.softmax(half, 1).dtype == torch.float32  # fp32 with dtype set
        assert torch.nn.functional.mse_loss(half, a).dtype == torch.float32
        assert torch.addcmul(a, half, a).dtype == torch.float32  # promote: widest input
        assert (a + b).dtype == torch.float32  # not listed: runs as given
    assert not torch.npu.is_autocast_enabled()
    # The same computation on CPU tensors under CUDA's policy gives the same values.
    with torch.autocast("npu"):
        got = (a @ b).float().cpu()
    expected = (a.cpu().half().float() @ b.cpu().half().float())
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)


# PyTorch's own autocast test lists (torch.testing._internal.autocast_test_lists,
# the ones its CUDA tests and torch_npu's test/test_npu.py use): list -> (the
# dtype the op must produce, the module of the op, the autocast dtype).
_LISTS = {
    "torch_fp16": (torch.float16, torch, torch.float16),
    "torch_fp32": (torch.float32, torch, torch.float16),
    "nn_fp16": (torch.float16, torch._C._nn, torch.float16),
    "nn_fp32": (torch.float32, torch._C._nn, torch.float16),
    "linalg_fp16": (torch.float16, torch._C._linalg, torch.float16),
    "methods_fp16": (torch.float16, None, torch.float16),
    "methods_fp32": (torch.float32, None, torch.float16),
    "torch_need_autocast_promote": (torch.float32, torch, torch.float16),
}
# Ops of those lists the npu does not run, with the reason.
_NOT_ON_NPU = {
    # CUDA-only ops (cuDNN): no CPU kernel for the simulator to run.
    "cudnn_convolution", "cudnn_convolution_transpose",
}


def _list_cases():
    from torch.testing._internal.autocast_test_lists import AutocastTestLists

    lists = AutocastTestLists(torch.device("npu:0"))
    for name, (out_dtype, module, fast) in _LISTS.items():
        for entry in getattr(lists, name):
            op, args = entry[0], entry[1]
            kwargs = entry[2] if len(entry) == 3 and isinstance(entry[2], dict) else {}
            if len(entry) == 3 and not isinstance(entry[2], dict) and entry[2]:
                continue  # the list marks it skipped (ROCm) or malformed (einsum's entry)
            if op not in _NOT_ON_NPU:
                yield name, op, args, kwargs, out_dtype, module, fast


def test_autocast_follows_pytorchs_autocast_test_lists():
    checked = 0
    for name, op, args, kwargs, out_dtype, module, fast in _list_cases():
        with torch.autocast("npu", dtype=fast):
            results = []
            if module is not None and hasattr(module, op):
                results.append(getattr(module, op)(*args, **kwargs))
            if hasattr(torch.Tensor, op):
                results.append(getattr(args[0], op)(*args[1:], **kwargs))
        assert results, f"{name}: {op} not found"
        for r in results:
            if isinstance(r, torch.Tensor):
                assert r.dtype == out_dtype, f"{name}: {op} gave {r.dtype}, CUDA's autocast gives {out_dtype}"
                checked += 1
    assert checked > 100


def test_autocast_refuses_binary_cross_entropy_as_cuda_does():
    a = torch.rand(4, 4, device="npu")
    b = torch.rand(4, 4, device="npu")
    with torch.autocast("npu"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(a, b)
        assert torch.nn.functional.binary_cross_entropy_with_logits(a, b).dtype == torch.float32
    assert torch.nn.functional.binary_cross_entropy(a, b).dtype == torch.float32  # allowed outside


def test_npu_amp_autocast_bfloat16_and_nesting():
    a = torch.randn(4, 4, device="npu")
    with torch.npu.amp.autocast(dtype=torch.bfloat16):
        assert torch.npu.get_autocast_dtype() == torch.bfloat16
        assert (a @ a).dtype == torch.bfloat16
        with torch.npu.amp.autocast(enabled=False):
            assert (a @ a).dtype == torch.float32
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.npu.is_bf16_supported()


def test_autocast_state_functions():
    torch.npu.set_autocast_enabled(True)
    try:
        torch.npu.set_autocast_dtype(torch.bfloat16)
        assert torch.npu.is_autocast_enabled()
        assert (torch.ones(2, 2, device="npu") @ torch.ones(2, 2, device="npu")).dtype == torch.bfloat16
    finally:
        torch.npu.set_autocast_enabled(False)
        torch.npu.set_autocast_dtype(torch.float16)


def test_autocast_refuses_an_unsupported_dtype():
    with pytest.warns(UserWarning, match="npu"):
        with torch.autocast("npu", dtype=torch.float64):
            pass


def _train(device: str, scaler: torch.amp.GradScaler, steps: int = 4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    data = [torch.randn(4, 8, generator=gen) for _ in range(steps)]
    scales = []
    torch_npu.npu.reset_host_sync_stats()
    for x in data:
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(x.to(device)).float().pow(2).mean() * 1e4  # large: forces overflow skips
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    syncs = torch_npu.npu.host_sync_stats()
    return [p.detach().cpu() for p in model.parameters()], scales, syncs


def test_grad_scaler_trains_like_cpu_and_syncs_only_where_pytorch_does():
    npu_params, npu_scales, syncs = _train("npu", torch.npu.amp.GradScaler(init_scale=2.0**30, growth_interval=2))
    cpu_params, cpu_scales, _ = _train("cpu", torch.amp.GradScaler("cpu", init_scale=2.0**30, growth_interval=2))
    assert npu_scales == cpu_scales
    for p, q in zip(npu_params, cpu_params):
        torch.testing.assert_close(p, q, atol=1e-2, rtol=1e-2)
    # Unscaling and the scale update run on the stream; the only host reads are
    # PyTorch's own (the optimizer-step check of found_inf, get_scale()).
    # Per step: the input's copy to npu, the optimizer step's check of found_inf
    # and get_scale(), nothing from unscaling or the scale update.
    assert syncs == {"aten::copy_ (cpu to npu)": 4, "aten::_local_scalar_dense": 8}, syncs


def test_grad_scaler_signature_and_checks():
    s = torch.npu.amp.GradScaler(init_scale=4.0, growth_factor=3.0, backoff_factor=0.25,
                                 growth_interval=5, dynamic=False)
    assert s.get_growth_factor() == 3.0 and s.get_backoff_factor() == 0.25
    x = torch.ones(1, device="npu", requires_grad=True)
    opt = torch.optim.SGD([x], lr=1.0)
    (s.scale(x * float("inf"))).sum().backward()
    s.step(opt)
    s.update()
    assert s.get_scale() == 4.0, "dynamic=False keeps the scale after an overflow"
    with pytest.raises(AssertionError):
        torch.npu.amp.GradScaler(growth_factor=1.0).scale(torch.ones(1, device="npu"))
