"""``torch_npu.npu._backends``: where torch_npu defines :func:`get_soc_version`.

Code written for torch_npu imports it from here (``from
torch_npu.npu._backends import get_soc_version``); it is
:func:`torch_npu.npu._platform.get_soc_version`.
"""

from ._platform import get_soc_version

__all__ = ["get_soc_version"]
