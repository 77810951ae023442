"""Registration of the npu backend: ``import torch_npu`` renames PrivateUse1 to
npu, installs ``torch.npu``, ``Tensor.npu()``/``is_npu``, ``Module.npu()``, the
guard, hooks, allocator and generator, and makes ``torch.accelerator`` report
npu."""

import torch
import torch_npu

from conftest import run_py_ok


def test_privateuse1_is_renamed_npu():
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.device("npu:1").type == "npu"
    assert torch.device("npu:1").index == 1


def test_torch_npu_device_module():
    assert torch.npu is torch_npu.npu
    assert torch.npu.is_available()
    assert torch.npu.device_count() == 2
    assert torch.get_device_module("npu") is torch_npu.npu


def test_tensor_npu_method_and_is_npu():
    c = torch.arange(4.0)
    assert not c.is_npu
    n = c.npu()
    assert n.is_npu and n.device == torch.device("npu:0")
    n1 = c.npu(1)
    assert n1.device == torch.device("npu:1")
    assert n1.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert c.to("npu").is_npu


def test_module_npu_moves_parameters():
    m = torch.nn.Linear(3, 2)
    m.npu()
    assert all(p.is_npu for p in m.parameters())
    y = m(torch.ones(1, 3, device="npu"))
    assert y.is_npu and y.shape == (1, 2)


def test_storage_npu():
    s = torch.arange(3.0).untyped_storage().npu()
    assert s.device.type == "npu"
    assert s.is_npu


def test_accelerator_reports_npu():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("npu")
    assert torch.accelerator.device_count() == 2


def test_factory_on_npu_uses_caching_allocator_and_generator():
    torch.npu.manual_seed(5)
    x = torch.randn(256, device="npu")
    with_x = torch.npu.memory_allocated()
    assert with_x >= 256 * 4
    torch.npu.manual_seed(5)
    y = torch.randn(256, device="npu")
    assert torch.equal(x.cpu(), y.cpu())
    del x, y
    torch.npu.synchronize()
    assert torch.npu.memory_allocated() <= with_x - 256 * 4
    gen = torch.npu.default_generators[0]
    assert gen.device == torch.device("npu:0")


def test_hooks_report_device_and_pinned_memory():
    assert torch._C._get_accelerator() == torch.device("npu")
    p = torch.ones(8).pin_memory()
    assert p.is_pinned()
    assert not torch.ones(8).is_pinned()


def test_guard_device_switch():
    x = torch.ones(2, device="npu:1")
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
    # ops on npu:1 tensors run on device 1 without changing the current device
    y = x + 1
    assert y.device == torch.device("npu:1")
    assert torch.npu.current_device() == 0


def test_generic_device_module_functions():
    m = torch.get_device_module("npu")
    assert m.current_device() == 0
    assert m.device_count() == 2


def test_fresh_interpreter_import_only():
    out = run_py_ok(
        """
        import torch, torch_npu
        x = torch.randn(10, device="npu")
        print(torch.accelerator.current_accelerator(), x.device, x.is_npu, x.sum().item() == x.cpu().sum().item())
        """
    )
    assert out.split() == ["npu", "npu:0", "True", "True"]
