"""Parts of torch_npu's import surface that code written for torch_npu relies on:
``torch_npu.unsupported_dtype`` and the FSDP gradient scaler
``torch_npu.npu.amp.sharded_grad_scaler._ShardedGradScaler``."""

import pytest
import torch
import torch_npu

from conftest import run_py_ok


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_unsupported_dtype_lists_what_npu_tensors_cannot_be():
    assert torch_npu.unsupported_dtype == [torch.quint8, torch.quint4x2, torch.quint2x4,
                                           torch.qint32, torch.qint8]
    # True to its name: a quantized tensor cannot move to npu...
    q = torch.quantize_per_tensor(torch.rand(4), 0.1, 0, torch.quint8)
    with pytest.raises(NotImplementedError):
        q.to("npu")
    # ...and every other dtype of torch can.
    for dtype in {v for v in vars(torch).values() if isinstance(v, torch.dtype)}:
        if dtype in torch_npu.unsupported_dtype or not dtype.is_floating_point:
            continue
        assert torch.zeros(2, dtype=dtype, device="npu").dtype == dtype


def test_sharded_grad_scaler_unscales_and_skips_steps_with_inf():
    out = run_py_ok(
        """
        import os, sys, tempfile
        import torch, torch_npu, torch.distributed as dist
        print("torch.distributed.fsdp" in sys.modules)  # not imported by torch_npu
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        from torch_npu.npu.amp.sharded_grad_scaler import _ShardedGradScaler
        fd, path = tempfile.mkstemp(); os.close(fd); os.unlink(path)
        dist.init_process_group("hccl", init_method="file://" + path, rank=0, world_size=1)
        # torch_npu's patch: PyTorch's name is the npu scaler, npu by default.
        print(ShardedGradScaler is _ShardedGradScaler)
        scaler = ShardedGradScaler(init_scale=4.0)
        print(scaler._device)
        w = torch.nn.Parameter(torch.ones(4, device="npu"))
        opt = torch.optim.SGD([w], lr=0.5)
        scaler.scale((w * 2).sum()).backward()  # scaled gradient 8, unscaled 2
        scaler.step(opt)
        scaler.update()
        print(w[0].item(), scaler.get_scale())
        opt.zero_grad()
        w.grad = torch.full((4,), float("inf"), device="npu")
        scaler.step(opt)  # skipped
        scaler.update()  # backs off
        print(w[0].item(), scaler.get_scale())
        dist.destroy_process_group()
        """
    )
    assert out.split() == ["False", "True", "npu", "0.0", "4.0", "0.0", "2.0"]
