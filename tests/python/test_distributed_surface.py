"""torch_npu's distributed Python surface (torch_npu/distributed, csrc/python/Distributed.cpp):
``torch_npu._C._distributed_c10d`` (ProcessGroupHCCL and its Options, ParallelStore), the
torch.distributed functions torch_npu replaces, reinit_process_group, fsdp.fully_shard.

In-process, on single-rank groups; what needs peers (values of gather and
batch_isend_irecv, the ephemeral timeout, reinit after a failure, DDP's parameter check,
fully_shard training) is in dist_workers.check_npu_c10d_functions, run by
test_distributed.py's two-rank spawn.
"""

from __future__ import annotations

import datetime
import socket
import subprocess
import sys
import threading

import pytest
import torch
import torch.distributed as dist
import torch_npu
from torch_npu._C._distributed_c10d import ParallelStore, ProcessGroupHCCL

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")

npu_c10d = torch_npu.distributed.distributed_c10d

# A pool stream's kind, in torch_npu's stream-id layout (id >> 5), as
# test_npu_style.py reads it: torch_npu's Stream.priority is unsupported.
_NORMAL_PRIORITY_POOL, _HIGH_PRIORITY_POOL = 3, 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def single_rank_group(tmp_path):
    dist.init_process_group(
        "hccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1,
        pg_options=ProcessGroupHCCL.Options(is_high_priority_stream=True),
    )
    try:
        yield dist.distributed_c10d._get_default_group()
    finally:
        dist.destroy_process_group()


def test_torch_npu_functions_replace_torch_distributeds():
    c10d = dist.distributed_c10d
    assert torch._C._distributed_c10d._verify_params_across_processes is (
        torch_npu.distributed._verify_params_across_processes)
    assert dist._verify_params_across_processes is torch_npu.distributed._verify_params_across_processes
    assert torch._C._distributed_c10d.ProcessGroup._get_sequence_number_for_group is (
        npu_c10d._hccl_get_sequence_number_for_group)
    assert c10d._add_ephemeral_timeout_for_all_pgs is npu_c10d._hccl_add_ephemeral_timeout_for_all_pgs
    for module in (dist, c10d):
        assert module.batch_isend_irecv is npu_c10d._batch_isend_irecv
        assert module.gather is npu_c10d._gather
        assert module.gather_object is npu_c10d._gather_object
    assert dist.is_hccl_available is torch_npu.distributed.is_hccl_available
    assert dist.reinit_process_group is torch_npu.distributed.reinit_process_group
    assert dist.is_hccl_available() and "hccl" in dist.Backend.backend_list


def test_top_level_names_and_submodule():
    import torch_npu._C._distributed_c10d as c10d_npu

    assert sys.modules["torch_npu._C._distributed_c10d"] is c10d_npu
    assert torch_npu.ParallelStore is c10d_npu.ParallelStore
    assert "ParallelStore" not in torch_npu.__all__
    assert "_ShardedGradScaler" not in torch_npu.__all__
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        torch_npu.no_such_name  # noqa: B018


def test_import_loads_no_fsdp_until_sharded_grad_scaler_is_used():
    code = (
        "import sys, torch_npu\n"
        "assert 'torch.distributed.fsdp' not in sys.modules\n"
        "from torch_npu.npu.amp.sharded_grad_scaler import _ShardedGradScaler\n"
        "assert torch_npu._ShardedGradScaler is _ShardedGradScaler\n"
        "import torch.distributed.fsdp.sharded_grad_scaler as s\n"
        "assert s.ShardedGradScaler is _ShardedGradScaler\n"
        "import torch_npu.distributed.fsdp as f, torch.distributed.fsdp as t\n"
        "assert f.fully_shard.state is t.fully_shard.state and f.__all__ == ['fully_shard']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_options_fields_defaults_and_bad_values():
    o = ProcessGroupHCCL.Options()
    assert isinstance(o, dist.ProcessGroup.Options if hasattr(dist.ProcessGroup, "Options")
                      else torch._C._distributed_c10d.Backend.Options)
    assert o.backend == "hccl" and o.is_high_priority_stream is False
    assert o.op_timeout == datetime.timedelta(seconds=10)  # torch_npu's default
    o.hccl_config = {"hccl_buffer_size": 200, "group_name": "tp"}
    assert o.hccl_config == {"hccl_buffer_size": 200, "group_name": "tp"}
    o.global_ranks_in_group, o.group_id = [0, 2], "7"
    assert (o.global_ranks_in_group, o.group_id) == ([0, 2], "7")
    assert ProcessGroupHCCL.Options(True).is_high_priority_stream
    with pytest.raises(TypeError):
        o.hccl_config = {"hccl_buffer_size": 1.5}
    with pytest.raises(TypeError):
        o.is_high_priority_stream = "yes"


def test_options_reach_the_group(single_rank_group):
    backend = single_rank_group._get_backend(torch.device("npu"))
    assert isinstance(backend, ProcessGroupHCCL)
    opts = backend.options
    assert opts.is_high_priority_stream and opts._timeout == dist.default_pg_timeout
    assert opts.global_ranks_in_group == [] and opts.group_id == "0"
    dist.all_reduce(torch.ones(2, device="npu"))
    sid, dev, dtype = backend.comm_stream()
    assert (sid >> 5) == _HIGH_PRIORITY_POOL


def test_options_default_to_a_normal_priority_stream_and_refuse_other_types(tmp_path):
    store = dist.HashStore()
    pg = ProcessGroupHCCL(store, 0, 1, datetime.timedelta(seconds=30))
    assert pg.options._timeout == datetime.timedelta(seconds=30)
    x = torch.ones(2, device="npu")
    pg.allreduce([x]).wait()
    assert x.cpu().tolist() == [1.0, 1.0]  # done before the group goes away
    sid, dev, dtype = pg.comm_stream()
    assert (sid >> 5) == _NORMAL_PRIORITY_POOL
    with pytest.raises(TypeError, match="expected pg_options of an hccl group to be a .*ProcessGroupHCCL.Options, but got _Options"):
        dist.init_process_group("hccl", init_method=f"file://{tmp_path / 's'}", rank=0, world_size=1,
                                pg_options=dist.ProcessGroupGloo._Options())
    assert not dist.is_initialized()


def test_sequence_numbers_count_collectives(single_rank_group):
    pg = single_rank_group
    start = pg._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(2, device="npu"))
    dist.broadcast(torch.ones(2, device="npu"), 0)
    assert pg._get_sequence_number_for_group() == start + 2
    gloo = dist.new_group([0], backend="gloo")  # PyTorch's method still serves gloo groups
    assert gloo._get_sequence_number_for_group() == 0


def test_single_rank_functions(single_rank_group):
    x = torch.arange(3.0, device="npu")
    out = [torch.empty(3, device="npu")]
    dist.gather(x, out, dst=0)
    assert out[0].cpu().tolist() == [0.0, 1.0, 2.0]
    objs = [None]
    dist.gather_object({"a": 1}, objs, dst=0)
    assert objs == [{"a": 1}]
    with pytest.raises(ValueError, match="must be specified on destination rank"):
        dist.gather(x, None, dst=0)
    torch_npu.distributed._verify_params_across_processes(single_rank_group, [x, torch.ones(2, 2, device="npu")])
    dist.distributed_c10d._add_ephemeral_timeout_for_all_pgs(datetime.timedelta(seconds=5))
    with pytest.raises(TypeError, match="expected a datetime.timedelta, but got int"):
        dist.distributed_c10d._add_ephemeral_timeout_for_all_pgs(5)
    backend = single_rank_group._get_backend(torch.device("npu"))
    with pytest.raises(RuntimeError, match="expected a non-negative timeout, but got -1000 ms"):
        backend._add_ephemeral_timeout(datetime.timedelta(seconds=-1))
    with pytest.raises(RuntimeError, match="expected at least one operation"):
        backend.batch_isend_irecv([], [], [])
    with pytest.raises(RuntimeError, match=r"expected operation types \"isend\" or \"irecv\", but got \"send\" at index 0"):
        backend.batch_isend_irecv(["send"], [x], [0])
    with pytest.raises(RuntimeError, match=r"expected remote ranks in \[0, 1\) other than this rank \(0\), but got 0"):
        backend.batch_isend_irecv(["isend"], [x], [0])
    with pytest.raises(RuntimeError, match="expected as many operation types and remote ranks as tensors"):
        backend.batch_isend_irecv(["isend", "irecv"], [x], [0])
    with pytest.raises(ValueError, match="P2POp"):
        dist.batch_isend_irecv([x])


def test_reinit_process_group_replaces_the_transport(single_rank_group):
    backend = single_rank_group._get_backend(torch.device("npu"))
    old = backend.transport
    assert dist.reinit_process_group() is single_rank_group
    assert backend.transport is not old
    x = torch.ones(3, device="npu")
    dist.all_reduce(x)
    assert x.cpu().tolist() == [1.0, 1.0, 1.0]
    same = backend.transport
    assert dist.reinit_process_group(rebuild_link=False) is None
    assert backend.transport is same  # nothing to resume: never paused here
    with pytest.raises(TypeError, match="expected rebuild_link to be a bool, but got str"):
        dist.reinit_process_group(rebuild_link="yes")
    gloo = dist.new_group([0], backend="gloo")
    assert dist.reinit_process_group(gloo) is gloo  # not hccl: unchanged


def test_reinit_without_a_default_group_says_so():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.reinit_process_group()


def test_parallel_store_is_a_store_for_init_process_group():
    port = _free_port()
    server = ParallelStore("127.0.0.1", port, 1, True, -1, True, False, datetime.timedelta(seconds=30))
    client = ParallelStore(port=port, timeout=datetime.timedelta(seconds=30))
    assert isinstance(server, dist.Store) and not isinstance(server, dist.TCPStore)
    assert (client.host, client.port) == ("127.0.0.1", port)
    server.set("k", "v")
    assert client.get("k") == b"v"
    assert client.add("n", 2) == 2 and server.add("n", 3) == 5
    prefixed = dist.PrefixStore("p/", client)
    prefixed.set("k", "w")
    assert dist.PrefixStore("p/", server).get("k") == b"w"
    dist.init_process_group("hccl", store=dist.PrefixStore("g/", server), rank=0, world_size=1)
    try:
        x = torch.ones(2, device="npu")
        dist.all_reduce(x)
        assert x.cpu().tolist() == [1.0, 1.0]
    finally:
        dist.destroy_process_group()


def test_parallel_store_server_waits_for_the_agents():
    # world_size counts agents (agent_run=True): the server's constructor
    # returns once the second agent registered.
    port = _free_port()
    made = {}

    def serve() -> None:
        made["server"] = ParallelStore("127.0.0.1", port, 2, True, -1, True,
                                       timeout=datetime.timedelta(seconds=60))

    t = threading.Thread(target=serve)
    t.start()
    agent = ParallelStore("127.0.0.1", port, 2, agent_run=True, timeout=datetime.timedelta(seconds=60))
    t.join(timeout=120)
    assert not t.is_alive() and "server" in made
    agent.set("x", "1")
    assert made["server"].get("x") == b"1"


def test_parallel_store_bad_arguments():
    with pytest.raises(RuntimeError, match="expected a host name or address, but got an empty string"):
        ParallelStore("", _free_port(), is_server=True)
    with pytest.raises(RuntimeError, match="expected a positive timeout, but got 0 ms"):
        ParallelStore("127.0.0.1", _free_port(), is_server=True, timeout=datetime.timedelta(0))
    with pytest.raises(RuntimeError, match="expected agent_pid to be a process id or -1, but got -5"):
        ParallelStore("127.0.0.1", _free_port(), is_server=True, agent_pid=-5)
    with pytest.raises(TypeError):
        ParallelStore("127.0.0.1", 70000)  # not a port
    # No server: the client gives up after its timeout, with c10d's error.
    with pytest.raises(dist.DistError):
        ParallelStore("127.0.0.1", _free_port(), timeout=datetime.timedelta(seconds=1))
