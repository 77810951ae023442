"""``torch_npu.utils``: the parts of torch_npu's utilities that code and tests import."""

from . import syncbatchnorm  # torch_npu exports the submodule at import
from .collect_env import get_cann_version
from .combine_tensors import get_part_combined_tensor, is_combined_tensor_valid, npu_combine_tensors
from .flops_count import _FlopsCounter as FlopsCounter
from ._save_async import save_async

__all__ = ["get_cann_version", "npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid",
           "FlopsCounter", "save_async"]
