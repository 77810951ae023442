"""Automatic mixed precision for npu (``torch.npu.amp``), as torch_npu ships it.

``torch.npu.amp.autocast(...)`` is ``torch.autocast("npu", ...)``;
``torch.npu.amp.GradScaler(...)`` is ``torch.amp.GradScaler("npu", ...)`` with
torch_npu's constructor signature. See Note [Autocast on npu]
(csrc/aten/Autocast.cpp) for the op lists.
"""

from . import common
from .autocast_mode import autocast, custom_bwd, custom_fwd
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]

from . import _fsdp_scaler_patch  # noqa: E402

_fsdp_scaler_patch.install()
