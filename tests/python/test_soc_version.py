"""Which chip and CANN the process runs on (torch_npu.npu._platform; Note
[Simulated chip model] in csrc/npurt/src/config.cpp): no chip and no CANN by
default; ``NPU_SIM_SOC_VERSION`` makes the devices one of torch_npu's chips,
so that code and tests gated on a chip run; ``SkipIfNotGteCANNVersion`` and
the CANN version functions answer as torch_npu does without a readable CANN."""

import unittest

import pytest
import torch

import torch_npu
from torch_npu.npu import utils
from torch_npu.testing.common_utils import SkipIfNotGteCANNVersion, SupportedDevices

from conftest import run_py, run_py_ok


def test_by_default_the_devices_are_no_chip():
    assert torch.npu.get_device_name(0) == "NPU-SIM-0"
    assert utils.get_soc_version() == -1
    assert torch_npu.npu._backends.get_soc_version() == -1


@pytest.mark.parametrize(
    "chip, code, gate",
    [
        ("Ascend910B1", 220, ["Ascend910B"]),
        ("Ascend910B4-1", 225, ["Ascend910B"]),
        ("Ascend910_9391", 250, ["Ascend910_93"]),
        ("Ascend310P3", 202, ["Ascend310P"]),
        ("Ascend950PR_9599", 260, ["Ascend950"]),
    ],
)
def test_a_simulated_chip_names_every_device_and_opens_its_gated_tests(chip, code, gate):
    out = run_py_ok(
        f"""
        import unittest
        import torch, torch_npu
        from torch_npu.npu.utils import get_soc_version
        from torch_npu.testing.common_utils import SupportedDevices
        names = {{torch.npu.get_device_name(d) for d in range(torch.npu.device_count())}}
        assert names == {{{chip!r}}}, names
        assert torch.npu.get_device_properties(1).name == {chip!r}

        class Case:
            @SupportedDevices({gate!r})
            def gated(self):
                return "ran"

            @SupportedDevices(["Ascend310B"])
            def other_chip(self):
                return "ran"

        assert Case().gated() == "ran"
        try:
            Case().other_chip()
            raise AssertionError("a test for another chip ran")
        except unittest.SkipTest as skip:
            print(skip)
        print(get_soc_version())
        """,
        env={"NPU_SIM_SOC_VERSION": chip},
    )
    skip, soc = out.strip().splitlines()
    assert skip.startswith("Only run on ['Ascend310B'], current device is Ascend")
    assert int(soc) == code


@pytest.mark.parametrize("value", ["Ascend999", "ascend910b1", "NPU-SIM", "Ascend910B1 "])
def test_an_unknown_chip_fails_initialisation_naming_it(value):
    p = run_py(
        """
        import torch, torch_npu
        torch.ones(1, device="npu")
        """,
        env={"NPU_SIM_SOC_VERSION": value},
    )
    assert p.returncode != 0
    assert "NPU_SIM_SOC_VERSION must name an Ascend chip model known to torch_npu" in p.stderr
    assert f"got '{value}'" in p.stderr


def test_without_cann_no_version_is_known_and_no_comparison_holds():
    for module in ("CANN", "RUNTIME", "DRIVER", "not a module"):
        assert utils.get_cann_version(module) == ""
    assert utils.get_cann_version() == ""
    assert utils._is_gte_cann_version("8.1.RC1") is False
    assert utils._is_gte_cann_version("9.0.0", module="RUNTIME") is False
    assert utils._is_gte_cann_version("not a version") is False
    with pytest.raises(RuntimeError, match='When the version 7.0.0 is less than "8.1.RC1"'):
        utils._is_gte_cann_version("7.0.0")
    with pytest.raises(RuntimeError, match="When the module is DRIVER, IsGteCANNVersion is not supported"):
        utils._is_gte_cann_version("25.0.0", module="DRIVER")
    with pytest.raises(TypeError, match="expects a str module name"):
        utils.get_cann_version(1)
    # torch_npu's environment report keeps its own wording for "none found".
    assert torch_npu.utils.get_cann_version() == "not known"


def test_skip_if_not_gte_cann_version_skips_with_torch_npus_reason():
    class Case:
        @SkipIfNotGteCANNVersion("9.0.0")
        def needs_cann_9(self):
            return "ran"

    with pytest.raises(unittest.SkipTest) as info:
        Case().needs_cann_9()
    assert str(info.value) == "Only run on 9.0.0 or greater, current cann version is ."
    assert Case.needs_cann_9.__name__ == "needs_cann_9"
    with pytest.raises(TypeError, match="SkipIfNotGteCANNVersion expects str"):
        SkipIfNotGteCANNVersion(9)
    # A chip gate and a CANN gate compose as in torch_npu's files.
    both = SupportedDevices(["NPU-SIM-0"[:10]])(SkipIfNotGteCANNVersion("8.5.0")(lambda self: "ran"))
    with pytest.raises(unittest.SkipTest, match="8.5.0 or greater"):
        both(Case())
