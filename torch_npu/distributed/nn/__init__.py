"""``torch_npu.distributed.nn``: torch_npu's additions to ``torch.distributed.nn`` (``functional``)."""

from . import functional

__all__: list[str] = []
