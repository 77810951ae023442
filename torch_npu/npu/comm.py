"""Copies of tensors across npu devices (``torch_npu.npu.comm``, ``torch.cuda.comm``'s npu twin).

The same functions as ``torch.cuda.comm`` (``torch.nn.parallel.comm``):
:func:`broadcast`, :func:`broadcast_coalesced`, :func:`reduce_add`,
:func:`reduce_add_coalesced`, :func:`scatter` and :func:`gather`, with the
same arguments and errors ("CUDA" reads "NPU"). They run on npu because
``import torch_npu`` defines the ``torch._C`` functions they call
(``_data_parallel_comm.py``). Copies are queued on streams, not waited for.
Sparse COO tensors are broadcast and reduced as with CUDA. ``reduce_add`` warns "PyTorch
is not compiled with NCCL support" (PyTorch's own check, as with torch_npu)
and adds with queued copies instead.
"""

from torch.nn.parallel.comm import (
    broadcast,
    broadcast_coalesced,
    gather,
    reduce_add,
    reduce_add_coalesced,
    scatter,
)

from . import _data_parallel_comm

_data_parallel_comm.install()

__all__ = [
    "broadcast",
    "broadcast_coalesced",
    "reduce_add",
    "reduce_add_coalesced",
    "scatter",
    "gather",
]
