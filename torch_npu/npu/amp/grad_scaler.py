"""``torch.npu.amp.GradScaler``: PyTorch's gradient scaler on npu."""

from collections import defaultdict

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

__all__ = ["GradScaler"]


class GradScaler(torch.amp.GradScaler):
    r"""``torch.amp.GradScaler("npu", ...)`` with torch_npu's constructor.

    The scale, the growth tracker and the found-inf flags live on the npu;
    unscaling and the scale update run on the current stream
    (``_amp_foreach_non_finite_check_and_unscale_`` and ``_amp_update_scale_``)
    without a host sync. ``dynamic=False`` keeps the scale fixed.

    Args:
        init_scale: initial scale factor.
        growth_factor: factor the scale grows by after ``growth_interval``
            steps without inf/NaN gradients (must be > 1).
        backoff_factor: factor the scale shrinks by after a step with inf/NaN
            gradients (must be < 1).
        growth_interval: steps without inf/NaN before the scale grows.
        dynamic: whether the scale changes at all.
        enabled: if False, every method is a no-op.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        dynamic: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
        self._dynamic = dynamic

    def update(self, new_scale=None) -> None:  # type: ignore[override]
        r"""Updates the scale (see ``torch.amp.GradScaler.update``); with
        ``dynamic=False`` only an explicit ``new_scale`` changes it."""
        if not self._enabled:
            return
        if not self._dynamic and new_scale is None:
            # Keep the scale; clear the per-step state as update() does.
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            return
        super().update(new_scale)
