"""Workers of test_fused_optimizers.py's distributed case, run in spawned processes.

Each rank has its own simulated device and joins a FileStore through gloo
over loopback (as dist_workers.py does). A failed check raises, and
torch.multiprocessing reports the rank's traceback.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist


def distributed_muon_matches_muon(rank: int, world: int, store_path: str) -> None:
    """_DistributedMuon over DTensor shards (dims 0 and 1) against torch.optim.Muon on whole tensors."""
    import torch_npu  # noqa: F401
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch_npu.optim import _DistributedMuon

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", init_method=f"file://{store_path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        mesh = init_device_mesh("npu", (world,))
        generator = torch.Generator().manual_seed(0)
        dims = (0, 1, 0)  # the third parameter is orthogonalized by rank 0 again (index 2 % 2)
        weights = [torch.randn(8, 6, generator=generator) for _ in dims]
        grads = [[torch.randn(8, 6, generator=generator) for _ in dims] for _ in range(2)]
        reference = [torch.nn.Parameter(w.clone()) for w in weights]
        reference_opt = torch.optim.Muon(reference, lr=0.02)
        params = [torch.nn.Parameter(distribute_tensor(w.npu(), mesh, [Shard(d)])) for w, d in zip(weights, dims)]
        opt = _DistributedMuon(params, lr=0.02, process_group=mesh.get_group())
        for step_grads in grads:
            for r, p, g, d in zip(reference, params, step_grads, dims):
                r.grad = g.clone()
                p.grad = distribute_tensor(g.npu(), mesh, [Shard(d)])
            reference_opt.step()
            opt.step()
        for r, p, d in zip(reference, params, dims):
            # Dim 1 iterates on the 8x8 Gram matrix where Muon transposes to 6x6: the same
            # polynomial, rounded differently in bfloat16. Dim 0 runs Muon's own function.
            tol = dict(rtol=0, atol=0) if d == 0 else dict(rtol=0, atol=3e-3)
            torch.testing.assert_close(p.full_tensor().cpu(), r.detach(), **tol)
    finally:
        dist.destroy_process_group()
