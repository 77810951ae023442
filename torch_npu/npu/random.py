"""Random number generation of ``torch_npu.npu`` (names follow ``torch.cuda``).

Each device has a default generator. Random ops reserve their numbers when
they are queued, so results depend only on the seed and the order of calls.
"""

from typing import Iterable, List, Tuple, Union

import torch

from .. import _C
from .utils import _checked_index, device_count

__all__ = [
    "default_generators",
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]

_DeviceLike = Union[torch.device, str, int, None]


class _DefaultGenerators:
    """Lazily created tuple of the default generators, one per device."""

    _gens: Tuple[torch.Generator, ...] = ()

    def get(self) -> Tuple[torch.Generator, ...]:
        if not self._gens:
            self._gens = tuple(_C._npu_defaultGenerators())
        return self._gens

    def __getitem__(self, i: int) -> torch.Generator:
        return self.get()[i]

    def __len__(self) -> int:
        return len(self.get())

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.get())


default_generators = _DefaultGenerators()


def get_rng_state(device: _DeviceLike = "npu") -> torch.Tensor:
    r"""The generator state of a device as a ByteTensor."""
    return default_generators[_checked_index(device)].get_state()


def get_rng_state_all() -> List[torch.Tensor]:
    r"""The generator states of all devices."""
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "npu") -> None:
    r"""Set the generator state of a device."""
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"set_rng_state expects a torch.ByteTensor, but got {type(new_state).__name__}")
    default_generators[_checked_index(device)].set_state(new_state.clone())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    r"""Set the generator state of every device."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    r"""Seed the current device's generator."""
    default_generators[_checked_index(None)].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    r"""Seed the generators of all devices."""
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    r"""Seed the current device's generator with a random number."""
    default_generators[_checked_index(None)].seed()


def seed_all() -> None:
    r"""Seed every device's generator with the same random number."""
    s = default_generators[0].seed()
    for g in default_generators:
        g.manual_seed(s)


def initial_seed() -> int:
    r"""The current seed of the current device's generator."""
    return default_generators[_checked_index(None)].initial_seed()


def _set_rng_state_offset(offset: int, device: _DeviceLike = "npu") -> None:
    r"""Set the Philox offset of a device's default generator (``torch.cuda``'s name).

    Args:
        offset (int): the new offset; a multiple of 4, as PyTorch's Philox
            generators require (else ``RuntimeError``).
        device (torch.device or int, optional): the device; the current one by default.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"_set_rng_state_offset expects an int offset, but got {type(offset).__name__}")
    default_generators[_checked_index(device)].set_offset(offset)


def _get_rng_state_offset(device: _DeviceLike = "npu") -> int:
    r"""The Philox offset of a device's default generator."""
    return default_generators[_checked_index(device)].get_offset()
