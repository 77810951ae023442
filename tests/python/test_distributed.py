"""torch.distributed's "hccl" backend on npu tensors (csrc/distributed,
torch_npu/distributed; docs/DISTRIBUTED.md).

Multi-process tests spawn 2 or 4 ranks on this machine, each on its own
simulated device, joined through a FileStore, with gloo on the loopback
interface only. The checks themselves live in dist_workers.py and share one
process group per spawn, because starting the processes is what costs.
In-process tests cover registration and the errors raised before any rank
talks to another.

The spawning tests are marked ``subprocess``: the ASan CI subset
(``make sanitize``) leaves them out like every test that starts interpreters
(tests/sanitizers/pytest_inprocess_only.py says why); the in-process tests
here run there, and ``make sanitize-full`` runs all of them.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch_npu

import dist_workers

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")


def _spawn(fn, world: int, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NPU_SIM_DEVICE_COUNT", str(world))
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    monkeypatch.delenv("NPU_SIM_TASK_DELAY_US", raising=False)
    mp.spawn(fn, args=(world, str(tmp_path / "store")), nprocs=world, join=True)


def test_backend_is_registered_for_npu():
    assert torch_npu.distributed.is_hccl_available()
    assert dist.Backend.HCCL == "hccl"
    assert dist.Backend.default_device_backend_map.get("npu") == "hccl"
    assert "npu" in dist.Backend.backend_capability["hccl"]


def test_single_rank_group_runs_and_refuses_bad_calls():
    store = dist.HashStore()
    pg = torch_npu.distributed.ProcessGroupHCCL(store, 0, 1, datetime.timedelta(seconds=30))
    assert pg.name() == "hccl"
    x = torch.arange(4.0, device="npu")
    work = pg.allreduce([x])
    work.wait()
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert pg.comm_stream() is not None
    with pytest.raises(RuntimeError, match=r"ProcessGroupHCCL::allreduce: expected npu tensors, but got a tensor on cpu"):
        pg.allreduce([torch.ones(2)])
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.BAND
    with pytest.raises(RuntimeError, match=r"ProcessGroupHCCL::allreduce: ReduceOp.BAND needs integer or bool tensors, but got Float"):
        pg.allreduce([x], opts)
    with pytest.raises(RuntimeError, match=r"ProcessGroupHCCL::send: expected a peer rank in \[0, 1\) other than this rank \(0\), but got 0"):
        pg.send([x], 0, 0)
    with pytest.raises(RuntimeError, match=r"ProcessGroupHCCL::recv: expected a peer rank .* but got 5"):
        pg.recv([x], 5, 0)
    with pytest.raises(RuntimeError, match=r"Backend hccl does not support shrink"):
        pg.shrink([0])
    with pytest.raises(RuntimeError, match=r"ProcessGroupHCCL: expected a store, but got None"):
        torch_npu.distributed.ProcessGroupHCCL(None, 0, 1)


@pytest.mark.subprocess
def test_four_ranks_every_collective(tmp_path, monkeypatch):
    _spawn(dist_workers.run_collectives, 4, tmp_path, monkeypatch)


@pytest.mark.subprocess
def test_two_ranks_collectives_stream_semantics_errors_ddp_mixed(tmp_path, monkeypatch):
    # One spawn for: every collective, async ordering under a task delay,
    # side streams, coalescing, refusals and external streams, DDP, FSDP2,
    # SyncBatchNorm, a
    # gloo timeout, then a "cpu:gloo,npu:hccl" group.
    _spawn(dist_workers.run_semantics, 2, tmp_path, monkeypatch)
