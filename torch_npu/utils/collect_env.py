"""Environment information (``torch_npu.utils.collect_env``).

The simulator runs without CANN, so the CANN version is ``"not known"`` — what
torch_npu reports when it finds no CANN installation.
"""

__all__ = ["get_cann_version"]


def get_cann_version(module: str = "CANN") -> str:
    r"""The installed CANN version: always ``"not known"`` on the simulator.

    Args:
        module (str): the CANN component asked about; accepted for torch_npu
            compatibility, and answered the same way.
    """
    if not isinstance(module, str):
        raise TypeError(f"get_cann_version expects a str module name, but got {type(module).__name__}")
    return "not known"
