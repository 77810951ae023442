"""``torch_npu.utils``: the parts of torch_npu's utilities that code and tests import."""

from . import syncbatchnorm  # torch_npu exports the submodule at import
from .collect_env import get_cann_version
from .flops_count import _FlopsCounter as FlopsCounter

__all__ = ["get_cann_version", "FlopsCounter"]
