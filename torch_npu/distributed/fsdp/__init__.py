"""``torch_npu.distributed.fsdp``: FSDP2's ``fully_shard`` as torch_npu exports it.

torch_npu's ``fully_shard`` is PyTorch's (``torch.distributed.fsdp.fully_shard``)
after torch_npu's optional FSDP2 patches: an opt-in cache of communication
buffers (``module._use_mem_cache``) and skipping a repeated all-gather when
activation recomputation runs a layer's forward again. Both tune device memory
and communication volume on Ascend hardware and are not mirrored here: on the
simulator ``fully_shard`` shards, all-gathers and reduce-scatters through the
hccl backend exactly as PyTorch's does (docs/DISTRIBUTED.md).
"""

import functools
from typing import Any

from torch.distributed.fsdp import fully_shard as _torch_fully_shard

__all__ = ["fully_shard"]


@functools.wraps(_torch_fully_shard)
def fully_shard(*args: Any, **kwargs: Any) -> Any:
    return _torch_fully_shard(*args, **kwargs)


fully_shard.__module__ = __name__
# FSDP2's accessor of a module's sharding state, as on PyTorch's function.
fully_shard.state = _torch_fully_shard.state  # type: ignore[attr-defined]
