"""``torch.npu.amp.common``, torch_npu's counterpart of ``torch.cuda.amp.common``."""

import torch_npu

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available() -> bool:
    r"""True if no npu device is available, so mixed precision on npu cannot run.

    ``torch.cuda.amp.common``'s function for the npu: a ``GradScaler`` disables
    itself when this is true.
    """
    return not torch_npu.npu.is_available()
