"""Which chip and which CANN the process runs on: torch_npu's answers on the simulator.

- :func:`get_soc_version` is torch_npu's chip code (``SocVersion``: 220 for
  Ascend910B1, 260 for Ascend950, ...). The simulated devices are no chip, so
  it is -1 (torch_npu's ``UnsupportedSocVersion``) unless
  ``NPU_SIM_SOC_VERSION`` names one; then the devices take that chip's name
  too (``get_device_name``), and code or tests written for that chip
  (``SupportedDevices([...])``) run. Only the name changes: the simulator
  models no difference between chips.
- :func:`get_cann_version` and :func:`_is_gte_cann_version` answer as torch_npu
  does where no CANN of 8.1.RC1 or later reports its version: the version is
  ``""`` and no version comparison holds. The simulator has no CANN; its ACL
  API is that of CANN 8.0 (``aclrtGetVersion``).
"""

from typing import List

from .. import _C

__all__ = ["get_soc_version", "get_cann_version"]

# The modules torch_npu's get_cann_version knows (aclsysGetCANNVersion's
# package names and aclsysGetVersionStr's).
_CANN_MODULES = frozenset({
    "CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER",
    "runtime", "compiler", "hccl", "toolkit", "opp", "ops", "opp_kernel", "driver",
})
# The oldest CANN whose version torch_npu can read.
_FIRST_READABLE_CANN = "8.1.RC1"


def get_soc_version() -> int:
    r"""The chip's code in torch_npu's ``SocVersion`` numbering, -1 for none.

    -1 on the simulator unless ``NPU_SIM_SOC_VERSION`` names a chip
    (``Ascend910B1`` gives 220, ``Ascend910_9391`` 250, ``Ascend950PR`` 260).
    Initialises the device.
    """
    from .utils import _lazy_init

    _lazy_init()
    return int(_C._npu_get_soc_version())


def get_cann_version(module: str = "CANN") -> str:
    r"""The version of a CANN component, ``""`` when it cannot be told.

    Args:
        module (str): ``"CANN"``, ``"RUNTIME"``, ``"COMPILER"``, ``"HCCL"``,
            ``"TOOLKIT"``, ``"OPP"``, ``"OPP_KERNEL"`` or ``"DRIVER"``.

    Always ``""`` on the simulator, which has no CANN: torch_npu's answer for
    an installation older than 8.1.RC1 (which cannot report its version) and
    for a module name it does not know.
    """
    if not isinstance(module, str):
        raise TypeError(f"get_cann_version expects a str module name, but got {type(module).__name__}")
    return ""


def _version_tokens(version: str) -> List[str]:
    return version.replace("-", ".").split(".")


def _leading_number(token: str) -> int:
    digits = "".join(c for c in token if c.isdigit())
    return int(digits) if digits else 0


def _is_gte_cann_version(version: str, module: str = "CANN") -> bool:
    r"""Whether the installed ``module`` is at least ``version`` (torch_npu's check).

    Raises ``RuntimeError`` for ``module="DRIVER"`` and for a ``version`` older
    than 8.1.RC1, whose versions cannot be read, as torch_npu does. Otherwise
    ``False`` on the simulator: no CANN version is known, so none is reached.
    """
    if not isinstance(version, str) or not isinstance(module, str):
        raise TypeError("_is_gte_cann_version expects str version and module, but got "
                        f"{type(version).__name__} and {type(module).__name__}")
    if module == "DRIVER":
        raise RuntimeError("When the module is DRIVER, IsGteCANNVersion is not supported.")
    tokens = _version_tokens(version)
    if len(tokens) < 2 or not tokens[0].isdigit():
        return False
    base = _leading_number(_version_tokens(_FIRST_READABLE_CANN)[0])
    if _leading_number(tokens[0]) <= base and version < _FIRST_READABLE_CANN:
        raise RuntimeError(f'When the version {version} is less than "{_FIRST_READABLE_CANN}", '
                           "GetCANNVersion is not supported.")
    # torch_npu compares get_cann_version(module) with `version`; with no
    # version known ("") the comparison is invalid, and torch_npu answers False.
    return False
