"""``torch_npu.testing``'s helpers that torch_npu's own test files import:
SupportedDevices, freeze_rng_state, get_cycles_per_ms, _create_scaling_case,
create_common_tensor and common_distributed.skipIfUnsupportMultiNPU."""

import unittest

import pytest
import torch

from torch_npu.testing.common_distributed import skipIfUnsupportMultiNPU
from torch_npu.testing.common_utils import (
    SupportedDevices,
    _create_scaling_case,
    create_common_tensor,
    freeze_rng_state,
    get_cycles_per_ms,
)


class _Case:
    ran = False

    def method(self):
        self.ran = True
        return "ran"


def test_supported_devices_skips_named_chip_models_with_reason():
    wrapped = SupportedDevices(["Ascend910B", "Ascend910_93"])(_Case.method)
    case = _Case()
    with pytest.raises(unittest.SkipTest) as info:
        wrapped(case)
    assert not case.ran
    name = torch.npu.get_device_name(0)[:10]
    assert str(info.value) == f"Only run on ['Ascend910B', 'Ascend910_93'], current device is {name}."


def test_supported_devices_runs_on_the_simulated_name():
    name = torch.npu.get_device_name(0)[:10]
    assert SupportedDevices([name])(_Case.method)(_Case()) == "ran"


def test_supported_devices_keeps_the_name_and_rejects_a_bare_string():
    assert SupportedDevices(["Ascend910B"])(_Case.method).__name__ == "method"
    with pytest.raises(TypeError, match="'Ascend910B'"):
        SupportedDevices("Ascend910B")


def test_freeze_rng_state_restores_cpu_generator_even_on_error():
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    with pytest.raises(KeyError):
        with freeze_rng_state():
            torch.rand(100)
            raise KeyError("x")
    assert torch.equal(torch.rand(4), expected)


def test_cycles_per_ms_matches_sleep():
    cycles = get_cycles_per_ms()
    assert 1e5 < cycles < 2e6  # one cycle is one nanosecond; scheduling adds a little
    assert get_cycles_per_ms() == cycles  # cached


def test_create_scaling_case_shape():
    mod_c, mod_s, opt_c, opt_s, data, loss_fn, skip_iter = _create_scaling_case()
    assert skip_iter == 2 and len(data) == 4
    assert all(x.device.type == "npu" and x.shape == (8, 8) for pair in data for x in pair)
    for c, s in zip(mod_c.parameters(), mod_s.parameters()):
        assert c.device.type == "npu" and torch.equal(c.cpu(), s.cpu())
    assert isinstance(opt_c, torch.optim.SGD) and opt_c.param_groups[0]["lr"] == 1.0
    assert isinstance(loss_fn, torch.nn.MSELoss)
    _, _, opt, _, data, _, _ = _create_scaling_case(
        dtype=torch.float16, optimizer_ctor=torch.optim.Adam, optimizer_kwargs={"lr": 0.5}
    )
    assert isinstance(opt, torch.optim.Adam) and opt.param_groups[0]["lr"] == 0.5
    assert data[0][0].dtype == torch.float16


def test_create_common_tensor():
    import numpy as np

    cpu, npu = create_common_tensor([np.float32, 0, (2, 3)], -1, 1)
    assert cpu.dtype == torch.float32 and npu.device.type == "npu" and cpu.shape == (2, 3)
    assert torch.equal(cpu, npu.cpu()) and cpu.min() >= -1 and cpu.max() < 1
    with pytest.raises(ValueError, match="dtype, format, shape"):
        create_common_tensor([np.float32, (2, 3)], 0, 1)


def test_skip_if_unsupport_multi_npu():
    assert skipIfUnsupportMultiNPU(2)(_Case.method)(_Case()) == "ran"
    with pytest.raises(unittest.SkipTest, match="Multi-NPU 64 condition not satisfied"):
        skipIfUnsupportMultiNPU(64)(_Case.method)(_Case())
    with pytest.raises(TypeError, match="'2'"):
        skipIfUnsupportMultiNPU("2")


def test_instantiate_tests_makes_one_test_per_dtype_and_format():
    from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests

    calls = []

    @instantiate_tests
    class Case(unittest.TestCase):
        @Dtypes(torch.float16, torch.float32)
        @Formats(0, 29)
        def test_op(self, device, dtype, npu_format):
            calls.append((device, dtype, npu_format))

        @Dtypes(torch.int8)
        def test_plain(self, dtype):
            calls.append(dtype)

        def test_untouched(self):
            calls.append("untouched")

    names = sorted(n for n in vars(Case) if n.startswith("test_"))
    assert names == ["test_op_float16_0", "test_op_float16_29", "test_op_float32_0",
                     "test_op_float32_29", "test_plain_int8", "test_untouched"]
    result = unittest.TextTestRunner(stream=open("/dev/null", "w")).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Case))
    assert result.wasSuccessful() and result.testsRun == 6
    assert ("npu", torch.float32, 29) in calls and torch.int8 in calls and "untouched" in calls


def test_instantiate_tests_and_dtypes_reject_what_they_cannot_use():
    from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests

    with pytest.raises(RuntimeError, match="No dtypes given"):
        Dtypes()
    with pytest.raises(RuntimeError, match="Unknown dtype"):
        Dtypes("float32")
    with pytest.raises(RuntimeError, match="No formats given"):
        Formats()

    class NoParameter:
        @Dtypes(torch.float32)
        def test_op(self):
            pass

    with pytest.raises(RuntimeError, match="NoParameter.test_op: .*'dtype'"):
        instantiate_tests(NoParameter)
