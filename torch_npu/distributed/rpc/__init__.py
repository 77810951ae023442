"""``torch_npu.distributed.rpc``: the ``NPU_TENSORPIPE`` backend of ``torch.distributed.rpc``.

Importing torch_npu registers it, as torch_npu does::

    import torch, torch_npu
    import torch.distributed.rpc as rpc
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    options = NPUTensorPipeRpcBackendOptions(device_maps={"worker1": {"npu:0": "npu:1"}})
    rpc.init_rpc("worker0", rank=0, world_size=2,
                 backend=rpc.backend_registry.BackendType.NPU_TENSORPIPE,
                 rpc_backend_options=options)
    y = rpc.rpc_sync("worker1", torch.add, args=(torch.ones(2, device="npu:0"), 1))

``rpc_sync``, ``rpc_async``, ``remote`` and RRefs carry npu tensors; the device
maps decide where a received tensor lands; without a map, sending an npu tensor
raises torch's error. docs/DISTRIBUTED.md, "RPC".
"""

import torch.distributed.rpc as _rpc

__all__: list[str] = []

if _rpc.is_available():
    from . import backend_registry, options

    backend_registry._rpc_backend_registry()
