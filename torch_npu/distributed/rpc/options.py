"""``NPUTensorPipeRpcBackendOptions``: the options of the ``NPU_TENSORPIPE`` RPC backend.

torch_npu's class of the same name and arguments: torch's TensorPipe options,
with device maps and devices of the ``npu`` device type (torch's own
``TensorPipeRpcBackendOptions`` accepts CUDA devices only).
"""

from typing import Optional, Union

import torch
import torch.distributed.rpc.constants as rpc_constants
from torch._C import _get_privateuse1_backend_name
from torch._C._distributed_rpc import _TensorPipeRpcBackendOptionsBase

__all__ = ["NPUTensorPipeRpcBackendOptions"]

DeviceType = Union[int, str, torch.device]


def _to_device(device: DeviceType) -> torch.device:
    r"""``device`` as a ``torch.device``; raises ``ValueError`` unless it is an npu device."""
    device = torch.device(device)
    backend = _get_privateuse1_backend_name()
    if device.type != backend:
        raise ValueError(
            f"`set_devices` expect a list of {backend} devices, but got device type {device.type}."
        )
    return device


def _to_device_map(device_map: dict[DeviceType, DeviceType]) -> dict[torch.device, torch.device]:
    r"""``device_map`` with ``torch.device`` keys and values; raises ``ValueError`` if two
    source devices map to one target (a device map is one-to-one)."""
    full: dict[torch.device, torch.device] = {}
    sources_of: dict[torch.device, torch.device] = {}
    for source, target in device_map.items():
        source, target = torch.device(source), torch.device(target)
        if target in sources_of:
            raise ValueError(
                "`device_map` only supports 1-to-1 mapping, "
                f"trying to map {source} and {sources_of[target]} to {target}"
            )
        full[source] = target
        sources_of[target] = source
    return full


def _to_device_list(devices: list[DeviceType]) -> list[torch.device]:
    return [_to_device(d) for d in devices]


class NPUTensorPipeRpcBackendOptions(_TensorPipeRpcBackendOptionsBase):
    r"""Options of the ``NPU_TENSORPIPE`` backend (``rpc.init_rpc(..., backend=
    rpc.backend_registry.BackendType.NPU_TENSORPIPE, rpc_backend_options=...)``).

    Args:
        num_worker_threads (int, optional): threads of the agent's pool that
            runs received requests (default 16).
        rpc_timeout (float, optional): default timeout of an RPC, in seconds
            (default 60).
        init_method (str, optional): URL of the store for rendezvous
            (default ``"env://"``).
        device_maps (Dict[str, Dict], optional): per callee name, which device
            of the callee each local device's tensors land on, e.g.
            ``{"worker1": {"npu:0": "npu:1"}}``. An npu tensor can only be sent
            to a worker it has a map entry for; responses come back through the
            reverse of the caller's map.
        devices (List, optional): the npu devices the agent uses; by default,
            those of the device maps (local sources, and targets of the peers'
            maps to this worker).

    How the tensors travel and when they are ready: docs/DISTRIBUTED.md, "RPC".
    """

    def __init__(
        self,
        *,
        num_worker_threads: int = rpc_constants.DEFAULT_NUM_WORKER_THREADS,
        rpc_timeout: float = rpc_constants.DEFAULT_RPC_TIMEOUT_SEC,
        init_method: str = rpc_constants.DEFAULT_INIT_METHOD,
        device_maps: Optional[dict[str, dict[DeviceType, DeviceType]]] = None,
        devices: Optional[list[DeviceType]] = None,
        _transports: Optional[list] = None,
        _channels: Optional[list] = None,
    ) -> None:
        full_device_maps = {
            name: _to_device_map(device_map) for name, device_map in (device_maps or {}).items()
        }
        super().__init__(
            num_worker_threads,
            _transports,
            _channels,
            rpc_timeout,
            init_method,
            full_device_maps,
            _to_device_list(devices or []),
        )

    def set_device_map(self, to: str, device_map: dict[DeviceType, DeviceType]) -> None:
        r"""Adds ``device_map`` to the map for callee ``to`` (see the class).

        Raises ``ValueError`` if it maps a device to two targets, or two
        devices to one.
        """
        full_device_map = _to_device_map(device_map)
        current = super().device_maps.get(to, {})
        for source, target in full_device_map.items():
            if source in current and current[source] != target:
                raise ValueError(
                    "`set_device_map` only supports 1-to-1 mapping, trying"
                    f" to map {source} to {target} and {current[source]}"
                )
        super()._set_device_map(to, full_device_map)

    def set_devices(self, devices: list[DeviceType]) -> None:
        r"""Sets the npu devices the agent uses (see the class)."""
        self.devices = _to_device_list(devices)
