"""torch_npu.distributed.rpc (the NPU_TENSORPIPE backend) and
torch_npu.distributed.nn.functional (csrc/distributed/rpc,
torch_npu/distributed/rpc, torch_npu/distributed/nn; docs/DISTRIBUTED.md, "RPC").

One spawn of 2 ranks checks the multi-process behaviour (rpc_workers.py):
npu tensors through rpc_sync / rpc_async / remote, where device maps put them,
stream order on both sides, torch's errors without a map, and the hccl
gradients of torch.distributed.nn.functional. In-process tests cover the
registration, the options and the device-map validation.

The spawning test is marked ``subprocess``: the ASan CI subset
(``make sanitize``) leaves it out like every test that starts interpreters
(tests/sanitizers/pytest_inprocess_only.py says why); the in-process tests
run there.
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch_npu
from torch_npu.distributed.rpc import backend_registry as npu_registry
from torch_npu.distributed.rpc.options import (
    NPUTensorPipeRpcBackendOptions,
    _to_device,
    _to_device_map,
)

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and rpc.is_available()), reason="torch.distributed.rpc is not built"
)

NPU0, NPU1, CPU = torch.device("npu:0"), torch.device("npu:1"), torch.device("cpu")


@pytest.mark.subprocess
def test_rpc_and_nn_functional_across_two_processes(tmp_path, monkeypatch):
    import rpc_workers

    monkeypatch.setenv("NPU_SIM_DEVICE_COUNT", "2")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    monkeypatch.setenv("TP_SOCKET_IFNAME", "lo")
    monkeypatch.delenv("NPU_SIM_TASK_DELAY_US", raising=False)
    mp.spawn(rpc_workers.run_all, args=(2, str(tmp_path / "store")), nprocs=2, join=True)


def test_import_registers_the_backend_and_modules():
    for name in ("torch_npu.distributed.rpc", "torch_npu.distributed.nn", "torch_npu.distributed.nn.functional"):
        assert name in sys.modules, name
    assert rpc.backend_registry.backend_registered("NPU_TENSORPIPE")
    assert rpc.BackendType is rpc.backend_registry.BackendType
    assert repr(rpc.BackendType.NPU_TENSORPIPE) == "BackendType.NPU_TENSORPIPE"
    opts = rpc.backend_registry.construct_rpc_backend_options(
        rpc.BackendType.NPU_TENSORPIPE, rpc_timeout=5, num_worker_threads=4
    )
    assert isinstance(opts, NPUTensorPipeRpcBackendOptions)
    assert (opts.rpc_timeout, opts.num_worker_threads) == (5, 4)
    from torch.distributed.nn.functional import _AllGatherBase

    assert _AllGatherBase.backward is torch_npu.distributed.nn.functional._allgather_base_backward_hccl
    assert issubclass(
        torch_npu._C._distributed_rpc.TensorPipeAgent, torch._C._distributed_rpc.TensorPipeAgent
    )


def test_options_take_npu_device_maps_and_devices():
    opts = NPUTensorPipeRpcBackendOptions(device_maps={"w1": {"npu:0": "npu:1"}}, devices=["npu:0"])
    assert opts.device_maps == {"w1": {NPU0: NPU1}}
    assert opts.devices == [NPU0]
    opts.set_device_map("w1", {1: 0})  # indices are npu devices too
    assert opts.device_maps["w1"] == {NPU0: NPU1, NPU1: NPU0}
    opts.set_device_map("w1", {"npu:0": "npu:1"})  # the same entry again
    opts.set_devices(["npu:1", "npu:0"])
    assert opts.devices == [NPU1, NPU0]


def test_options_refuse_bad_maps_and_devices():
    opts = NPUTensorPipeRpcBackendOptions()
    opts.set_device_map("w1", {"npu:0": "npu:1"})
    with pytest.raises(ValueError, match=r"only supports 1-to-1 mapping, trying to map npu:0 to npu:0 and npu:1"):
        opts.set_device_map("w1", {"npu:0": "npu:0"})
    with pytest.raises(ValueError, match=r"only supports 1-to-1 mapping, trying to map npu:1 and npu:0 to npu:1"):
        _to_device_map({"npu:0": "npu:1", "npu:1": "npu:1"})
    with pytest.raises(ValueError, match=r"expect a list of npu devices, but got device type cpu"):
        _to_device("cpu")
    with pytest.raises(ValueError, match=r"expect a list of npu devices, but got device type cpu"):
        opts.set_devices(["npu:0", "cpu"])
    with pytest.raises(RuntimeError, match=r"Expected one of .* device type at start of device string: gpu"):
        NPUTensorPipeRpcBackendOptions(devices=["gpu:0"])
    assert _to_device("npu:1") == NPU1


def _validate(names, counts, maps, devices):
    npu_registry._validate_device_maps(names, counts, maps, devices)


def test_device_map_validation_errors():
    counts = {"a": {"npu": 2}, "b": {"npu": 2}}
    names = ["a", "b"]
    no_devices = {"a": [], "b": []}
    _validate(names, counts, {"a": {"b": {NPU0: NPU1}}, "b": {}}, no_devices)  # valid
    cases = [
        ({"a": {"c": {NPU0: NPU1}}, "b": {}}, no_devices, "a has invalid target node names"),
        ({"a": {}, "b": {}}, {"a": [NPU0, NPU0], "b": []}, "a has duplicated devices"),
        ({"a": {}, "b": {}}, {"a": [torch.device("npu:2")], "b": []}, "a has devices with invalid indices"),
        ({"a": {"b": {NPU0: NPU1, CPU: NPU1}}, "b": {}}, no_devices, "duplicated target devices"),
        ({"a": {"b": {NPU1: NPU0}}, "b": {}}, {"a": [NPU0], "b": []}, "unexpected source devices"),
        ({"a": {"b": {torch.device("npu:5"): NPU0}}, "b": {}}, no_devices, "source devices with invalid indices"),
        ({"a": {"b": {NPU0: NPU1}}, "b": {}}, {"a": [], "b": [NPU0]}, "unexpected target devices"),
        ({"a": {"b": {NPU0: torch.device("npu:7")}}, "b": {}}, no_devices, "target devices with invalid indices"),
    ]
    for maps, devices, needle in cases:
        with pytest.raises(ValueError, match=needle):
            _validate(names, counts, maps, devices)
    # A dynamic group's targets may not have joined yet.
    npu_registry._validate_device_maps(
        ["a"], {"a": {"npu": 2}}, {"a": {"later": {NPU0: NPU1}}}, {"a": []}, is_static_group=False
    )


def test_validate_devices_counts_per_device_type():
    assert npu_registry._tensorpipe_validate_devices([CPU, NPU1], {"npu": 2})
    assert not npu_registry._tensorpipe_validate_devices([NPU1], {"npu": 1})
    assert not npu_registry._tensorpipe_validate_devices([torch.device("npu")], {"npu": 1})
    assert npu_registry._get_device_count_info() == {"npu": torch.npu.device_count()}


def test_init_handler_refuses_wrong_store_and_options():
    with pytest.raises(TypeError, match=r"`store` must be a c10d::Store"):
        npu_registry._npu_tensorpipe_init_backend_handler(None, "w", 0, 1, NPUTensorPipeRpcBackendOptions())
    with pytest.raises(TypeError, match=r"`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`"):
        npu_registry._npu_tensorpipe_init_backend_handler(
            dist.HashStore(), "w", 0, 1, rpc.TensorPipeRpcBackendOptions()
        )
