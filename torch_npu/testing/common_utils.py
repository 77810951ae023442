"""Helpers of torch_npu's test suite (``torch_npu.testing.common_utils``).

Test files written for torch_npu import these names; they behave as torch_npu's
do, on the simulated NPU. Importing this module does not initialise the device.

- :class:`SupportedDevices` skips a test unless device 0 is one of the named
  chip models. The simulator's device name (``get_device_name``, e.g.
  ``'NPU-SIM-0'``) is no chip model, so such tests skip with a reason that
  names the models and the current device, unless ``NPU_SIM_SOC_VERSION``
  makes the devices one (``Ascend910B1``).
- :class:`SkipIfNotGteCANNVersion` skips a test unless CANN is at least the
  given version; the simulator has none, so such tests skip.
- :func:`get_cycles_per_ms` calibrates :func:`torch_npu.npu._sleep`, as
  ``torch.testing._internal.common_utils.get_cycles_per_ms`` does for CUDA.
"""

import contextlib
import functools
import itertools
import os
import statistics
import unittest
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import torch

__all__ = [
    "SkipIfNotGteCANNVersion",
    "SupportedDevices",
    "create_common_tensor",
    "freeze_rng_state",
    "get_cycles_per_ms",
    "get_npu_device",
    "is_iterable",
    "iter_indices",
    "set_npu_device",
]


def set_npu_device() -> str:
    r"""Select the device named by ``SET_NPU_DEVICE`` (default 0) and return ``'npu:N'``."""
    index = int(os.environ.get("SET_NPU_DEVICE", "0"))
    torch.npu.set_device(index)
    return f"npu:{index}"


def get_npu_device() -> str:
    r"""``'npu:N'`` for the device named by ``SET_NPU_DEVICE`` (default 0), without selecting it."""
    return f"npu:{int(os.environ.get('SET_NPU_DEVICE', '0'))}"


def is_iterable(obj: Any) -> bool:
    r"""True if ``iter(obj)`` works."""
    try:
        iter(obj)
        return True
    except TypeError:
        return False


def iter_indices(tensor: torch.Tensor) -> Iterator[Tuple[int, ...]]:
    r"""Every index tuple of ``tensor`` (one element tuples for 0-d/1-d)."""
    if tensor.dim() == 0:
        return iter([()])
    return itertools.product(*(range(s) for s in tensor.size()))


@contextlib.contextmanager
def freeze_rng_state() -> Iterator[None]:
    r"""Restore the CPU generator's state on exit (torch_npu's ``freeze_rng_state``).

    Like torch_npu's, this saves only the CPU generator: npu random numbers
    drawn inside the block advance the npu generators for good.
    """
    state = torch.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(state)


def create_common_tensor(
    item: Sequence[Any], minValue: float, maxValue: float, device: Optional[str] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    r"""A random CPU tensor and its npu copy, from ``item = [dtype, format, shape]``.

    ``dtype`` may be a numpy dtype or a ``torch.dtype``; ``format`` (torch_npu's
    private storage format) is ignored, since the simulator stores every tensor
    in its plain layout; values are uniform in ``[minValue, maxValue)``.
    """
    if len(item) != 3:
        raise ValueError(f"create_common_tensor expects item = [dtype, format, shape], but got {item!r}")
    dtype, _format, shape = item
    if not isinstance(dtype, torch.dtype):
        import numpy as np

        dtype = torch.from_numpy(np.zeros((), dtype=dtype)).dtype
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    cpu = (torch.rand(shape, dtype=torch.float64) * (maxValue - minValue) + minValue).to(dtype)
    return cpu, cpu.to(device or get_npu_device())


class SupportedDevices:
    r"""Decorator: run a test only on the named chip models (``@SupportedDevices(['Ascend910B'])``).

    The current model is the start of ``get_device_name(0)`` as torch_npu cuts
    it (``Ascend910B``, ``Ascend910_93``, ``Ascend950``). On the simulator the
    name is ``NPU-SIM-<n>``, which names no chip, so the test raises
    ``unittest.SkipTest("Only run on [...], current device is NPU-SIM-0.")``.
    """

    def __init__(self, supported_devices: List[str]) -> None:
        if isinstance(supported_devices, str) or not is_iterable(supported_devices):
            raise TypeError(
                f"SupportedDevices expects a list of chip model names, but got {supported_devices!r}"
            )
        self.supported_devices = list(supported_devices)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def dep_fn(slf: Any, *args: Any, **kwargs: Any) -> Any:
            full = torch.npu.get_device_name(0)
            name = full[:10]
            if name == "Ascend910_":
                name = full[:12]
            elif name.startswith("Ascend950"):
                name = full[:9]
            if name not in self.supported_devices:
                raise unittest.SkipTest(
                    f"Only run on {self.supported_devices!r}, current device is {name}."
                )
            return fn(slf, *args, **kwargs)

        return dep_fn


class SkipIfNotGteCANNVersion:
    r"""Decorator: run a test only with CANN ``base_version`` or later (``@SkipIfNotGteCANNVersion("9.0.0")``).

    Asks :func:`torch_npu.npu.utils._is_gte_cann_version`. The simulator has no
    CANN, so the test raises ``unittest.SkipTest("Only run on 9.0.0 or greater,
    current cann version is .")``, as on a CANN too old to report its version.
    """

    def __init__(self, base_version: str, module: str = "CANN") -> None:
        if not isinstance(base_version, str) or not isinstance(module, str):
            raise TypeError("SkipIfNotGteCANNVersion expects str base_version and module, but got "
                            f"{base_version!r} and {module!r}")
        self.base_version = base_version
        self.module = module

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def dep_fn(slf: Any, *args: Any, **kwargs: Any) -> Any:
            from torch_npu.npu.utils import _is_gte_cann_version, get_cann_version

            if not _is_gte_cann_version(self.base_version, module=self.module):
                raise unittest.SkipTest(
                    f"Only run on {self.base_version} or greater, current cann version is "
                    f"{get_cann_version(module=self.module)}."
                )
            return fn(slf, *args, **kwargs)

        return dep_fn


@functools.lru_cache
def get_cycles_per_ms() -> float:
    r"""Cycles of :func:`torch_npu.npu._sleep` per millisecond, measured with timing events.

    Takes ten measurements and averages the middle six (the first calls pay
    for initialisation). On the simulator one cycle is a nanosecond, so this
    is about 1e6; cached for the process.
    """

    def measure() -> float:
        start = torch.npu.Event(enable_timing=True)
        end = torch.npu.Event(enable_timing=True)
        start.record()
        torch.npu._sleep(1000000)
        end.record()
        end.synchronize()
        return 1000000 / start.elapsed_time(end)

    values = sorted(measure() for _ in range(10))
    return statistics.mean(values[2:-2])


def _create_scaling_models_optimizers(
    device: str = "npu",
    optimizer_ctor: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    optimizer_kwargs: Optional[dict] = None,
) -> Tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer, torch.optim.Optimizer]:
    r"""Two identical two-layer models with optimizers: one for a GradScaler, one control."""
    mod_control = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to(device=device)
    mod_scaling = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to(device=device)
    with torch.no_grad():
        for c, s in zip(mod_control.parameters(), mod_scaling.parameters()):
            s.copy_(c)
    kwargs = {"lr": 1.0}
    if optimizer_kwargs is not None:
        kwargs.update(optimizer_kwargs)
    return (
        mod_control,
        mod_scaling,
        optimizer_ctor(mod_control.parameters(), **kwargs),
        optimizer_ctor(mod_scaling.parameters(), **kwargs),
    )


def _create_scaling_case(
    device: str = "npu",
    dtype: torch.dtype = torch.float,
    optimizer_ctor: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    optimizer_kwargs: Optional[dict] = None,
) -> Tuple[Any, ...]:
    r"""``(mod_control, mod_scaling, opt_control, opt_scaling, data, loss_fn, skip_iter)``.

    The shape torch_npu's and PyTorch's GradScaler tests unpack: four (input,
    target) pairs of 8x8 tensors on ``device``, an ``MSELoss`` and
    ``skip_iter = 2`` (the iteration whose gradients the tests make inf).
    """
    data = [
        (torch.randn((8, 8), dtype=dtype, device=device), torch.randn((8, 8), dtype=dtype, device=device))
        for _ in range(4)
    ]
    loss_fn = torch.nn.MSELoss().to(device)
    skip_iter = 2
    return _create_scaling_models_optimizers(
        device=device, optimizer_ctor=optimizer_ctor, optimizer_kwargs=optimizer_kwargs
    ) + (data, loss_fn, skip_iter)
