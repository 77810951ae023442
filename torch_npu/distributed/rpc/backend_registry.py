"""The ``NPU_TENSORPIPE`` RPC backend: its registration with ``torch.distributed.rpc``.

torch_npu's module of the same name and functions. The backend is torch's
TensorPipe backend with an agent for npu tensors
(``torch_npu._C._distributed_rpc.TensorPipeAgent``, docs/DISTRIBUTED.md,
"RPC"): the handlers below are torch's TensorPipe handlers with the device
counts, device checks and device initialization of the npu device, and they
build that agent.
"""

from collections.abc import Iterable
from typing import Any, cast

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch._C import _get_privateuse1_backend_name
from torch.distributed.rpc import api, backend_registry as torch_registry
from torch.distributed.rpc import constants as rpc_constants
from torch.distributed.rpc._utils import _group_membership_management, _update_group_membership

__all__: list[str] = []

DeviceMaps = dict[str, dict[torch.device, torch.device]]


def _get_device_count_info() -> dict[str, int]:
    r"""``{"npu": device count}``: the devices this worker can use, by type
    (torch's handler counts CUDA devices only)."""
    name = _get_privateuse1_backend_name()
    return {name: getattr(torch, name).device_count()} if hasattr(torch, name) else {}


def _init_device_state(device_type: str) -> None:
    r"""Initializes the device runtime (its allocator and streams) before a
    peer can send tensors for it, as torch's handler does with ``torch.cuda.init()``."""
    module = getattr(torch, device_type, None)
    if module is not None and module.is_available():
        module.init()


def _tensorpipe_validate_devices(devices: Iterable[torch.device], device_count: dict[str, int]) -> bool:
    r"""Whether every device is the CPU or an existing device of a type in ``device_count``."""
    return all(
        d.type == "cpu" or (d.index is not None and 0 <= d.index < device_count.get(d.type, 0))
        for d in devices
    )


def _validate_device_maps(
    all_names: list[str],
    all_device_counts: dict[str, dict[str, int]],
    all_device_maps: dict[str, DeviceMaps],
    all_devices: dict[str, list[torch.device]],
    is_static_group: bool = True,
) -> None:
    r"""Raises ``ValueError`` (torch's messages) for any worker whose devices or
    device maps are inconsistent with the devices and names of the group."""
    for node in all_names:
        devices = all_devices[node]
        if len(set(devices)) != len(devices):
            raise ValueError(f"Node {node} has duplicated devices\ndevices = {devices}")
        if not _tensorpipe_validate_devices(devices, all_device_counts[node]):
            raise ValueError(
                f"Node {node} has devices with invalid indices\n"
                f"devices = {devices}\ndevice count = {all_device_counts[node]}"
            )
    for source in all_names:
        # A dynamic group's targets may not have joined yet.
        if is_static_group and not set(all_device_maps[source].keys()).issubset(all_names):
            raise ValueError(
                f"Node {source} has invalid target node names in its device maps\n"
                f"device maps = {all_device_maps[source].keys()}\nnode names = {all_names}"
            )
        for target, map_ in all_device_maps[source].items():
            _validate_device_map(source, target, map_, all_device_counts, all_devices)


def _validate_device_map(
    source: str,
    target: str,
    map_: dict[torch.device, torch.device],
    all_device_counts: dict[str, dict[str, int]],
    all_devices: dict[str, list[torch.device]],
) -> None:
    where = f"in its device map for {target}\ndevice map = {map_}"
    if len(set(map_.values())) != len(map_):
        raise ValueError(f"Node {source} has duplicated target devices {where}")
    if all_devices[source]:
        if not set(map_.keys()).issubset(all_devices[source]):
            raise ValueError(
                f"Node {source} has unexpected source devices {where}\n"
                f"devices = {all_devices[source]}"
            )
    elif not _tensorpipe_validate_devices(map_.keys(), all_device_counts[source]):
        raise ValueError(
            f"Node {source} has source devices with invalid indices {where}\n"
            f"device count = {all_device_counts[source]}"
        )
    if all_devices.get(target, []):
        if not set(map_.values()).issubset(all_devices[target]):
            raise ValueError(
                f"Node {source} has unexpected target devices {where}\n"
                f"devices = {all_devices[target]}"
            )
    elif target in all_device_counts and not _tensorpipe_validate_devices(
        map_.values(), all_device_counts[target]
    ):
        raise ValueError(
            f"Node {source} has target devices with invalid indices {where}\n"
            f"device count = {all_device_counts[target]}"
        )


def _get_device_infos() -> tuple[dict[str, int], DeviceMaps, list[torch.device]]:
    r"""This worker's device counts, device maps and devices (run by a peer that joins a dynamic group)."""
    agent = api._get_current_rpc_agent()
    opts = agent._get_backend_options()
    if opts.devices:
        _init_device_state(opts.devices[0].type)
    return _get_device_count_info(), opts.device_maps, opts.devices


def _tensorpipe_exchange_and_check_all_device_maps(
    my_name: str,
    my_device_count: dict[str, int],
    my_device_maps: DeviceMaps,
    my_devices: list[torch.device],
    group: dist.ProcessGroup,
) -> tuple[DeviceMaps, list[torch.device]]:
    r"""Gathers every worker's name, device counts, maps and devices over
    ``group``, validates them, and returns this worker's reverse device maps
    and devices."""
    gathered: list[Any] = [None] * group.size()
    dist.all_gather_object(gathered, (my_name, my_device_count, my_device_maps, my_devices), group)
    all_names = [name for name, _, _, _ in gathered]
    all_device_counts = {name: count for name, count, _, _ in gathered}
    all_device_maps = {name: maps for name, _, maps, _ in gathered}
    all_devices = {name: devices for name, _, _, devices in gathered}
    _validate_device_maps(all_names, all_device_counts, all_device_maps, all_devices)
    reverse_device_maps = torch_registry._create_reverse_mapping(my_name, all_names, all_device_maps)
    devices = torch_registry._create_device_list(my_devices, my_device_maps, reverse_device_maps)
    return reverse_device_maps, devices


def _set_devices_and_reverse_device_map(agent: Any) -> None:
    r"""For a worker joining a dynamic group: validates the group's device maps
    with this worker's and tells every worker (itself too) its devices and
    reverse maps."""
    me = agent.get_worker_info()
    all_device_counts: dict[str, dict[str, int]] = {}
    all_device_maps: dict[str, DeviceMaps] = {}
    all_devices: dict[str, list[torch.device]] = {}
    all_names: list[str] = []
    for info in agent.get_worker_infos():
        if info.name == me.name:
            opts = agent._get_backend_options()
            infos = (_get_device_count_info(), opts.device_maps, opts.devices)
        else:
            infos = api.rpc_sync(info.name, _get_device_infos)
        all_device_counts[info.name], all_device_maps[info.name], all_devices[info.name] = infos
        all_names.append(info.name)
    _validate_device_maps(
        all_names, all_device_counts, all_device_maps, all_devices, is_static_group=False
    )
    reverse_device_maps = torch_registry._create_reverse_mapping(me.name, all_names, all_device_maps)
    for name in all_names:
        devices = torch_registry._create_device_list(
            all_devices[name], all_device_maps[name], reverse_device_maps
        )
        api.rpc_sync(
            name, _update_group_membership, args=(me, devices, reverse_device_maps, True)
        )


def _backend_type_repr(self: Any) -> str:
    return "BackendType." + self.name


def _construct_rpc_backend_options(
    backend: Any,
    rpc_timeout: float = rpc_constants.DEFAULT_RPC_TIMEOUT_SEC,
    init_method: str = rpc_constants.DEFAULT_INIT_METHOD,
    **kwargs: Any,
) -> Any:
    return backend.value.construct_rpc_backend_options_handler(rpc_timeout, init_method, **kwargs)


def _init_backend(backend: Any, *args: Any, **kwargs: Any) -> Any:
    return backend.value.init_backend_handler(*args, **kwargs)


def _npu_tensorpipe_construct_rpc_backend_options_handler(
    rpc_timeout: float,
    init_method: str,
    num_worker_threads: int = rpc_constants.DEFAULT_NUM_WORKER_THREADS,
    _transports: Any = None,
    _channels: Any = None,
    **kwargs: Any,
) -> Any:
    from .options import NPUTensorPipeRpcBackendOptions

    return NPUTensorPipeRpcBackendOptions(
        rpc_timeout=rpc_timeout,
        init_method=init_method,
        num_worker_threads=num_worker_threads,
        _transports=_transports,
        _channels=_channels,
    )


def _npu_tensorpipe_init_backend_handler(
    store: dist.Store, name: str, rank: int, world_size: Any, rpc_backend_options: Any
) -> Any:
    r"""Builds the agent of a worker, as torch's TensorPipe handler does: for a
    static group (``world_size`` given), after exchanging and validating every
    worker's device maps; for a dynamic one, by joining the group."""
    from torch_npu._C._distributed_rpc import TensorPipeAgent

    from .options import NPUTensorPipeRpcBackendOptions

    if not isinstance(store, dist.Store):
        raise TypeError(f"`store` must be a c10d::Store. {store}")
    if not isinstance(rpc_backend_options, NPUTensorPipeRpcBackendOptions):
        raise TypeError(
            "`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`. "
            f"{rpc_backend_options}"
        )
    if not world_size:
        with _group_membership_management(store, name, True):
            agent = TensorPipeAgent(store, name, rank, world_size, rpc_backend_options, {}, [])
            api._init_rpc_states(agent)
            try:
                _set_devices_and_reverse_device_map(agent)
            except Exception:
                api.shutdown()
                raise
            return agent

    # The agent's join is a barrier over a process group, as in torch's handler.
    group = torch_registry._init_process_group(store, rank, world_size)
    reverse_device_maps, devices = _tensorpipe_exchange_and_check_all_device_maps(
        name,
        _get_device_count_info(),
        rpc_backend_options.device_maps,
        rpc_backend_options.devices,
        group,
    )
    if devices:
        # Before a peer can send tensors for them (torch: torch.cuda.init()).
        _init_device_state(devices[0].type)
    agent = TensorPipeAgent(
        store, name, rank, world_size, rpc_backend_options, reverse_device_maps, devices
    )
    api._init_rpc_states(agent)
    # One round of RPC opens the connections (torch's handler does the same,
    # so that shutdown does not time out), and a barrier keeps every worker
    # until all have finished it.
    api._all_gather(None, timeout=rpc_backend_options.rpc_timeout)
    group.barrier().wait()
    return agent


def _rpc_backend_registry() -> None:
    r"""Registers ``NPU_TENSORPIPE`` with ``torch.distributed.rpc`` (once)."""
    if not rpc.is_available():
        return
    if not torch_registry.backend_registered("NPU_TENSORPIPE"):
        torch_registry.register_backend(
            "NPU_TENSORPIPE",
            _npu_tensorpipe_construct_rpc_backend_options_handler,
            _npu_tensorpipe_init_backend_handler,
        )
    # register_backend rebinds backend_registry.BackendType to a new enum;
    # torch.distributed.rpc imported the old one by name.
    cast(Any, rpc).BackendType = torch_registry.BackendType
