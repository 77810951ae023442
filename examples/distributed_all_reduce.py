"""Two processes, one simulated NPU each, torch.distributed's "hccl" backend.

Run (one machine):
    NPU_SIM_DEVICE_COUNT=2 torchrun --nproc-per-node=2 examples/distributed_all_reduce.py

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous; the same
script runs across machines with --nnodes and --rdzv-endpoint
(docs/DISTRIBUTED.md).
"""

import os

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401  (registers the npu device and the "hccl" backend)


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.npu.set_device(local_rank)
    dist.init_process_group("hccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    x = torch.full((4,), float(rank + 1), device="npu")
    work = dist.all_reduce(x, async_op=True)  # queued after x's fill on the current stream
    work.wait()                                # the current stream waits; the host does not
    y = x * 2                                  # runs after the all_reduce, on the device
    expected = 2.0 * world * (world + 1) / 2
    print(f"rank {rank}/{world}: {y.tolist()} (expected {expected})")  # host read
    assert y.tolist() == [expected] * 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
