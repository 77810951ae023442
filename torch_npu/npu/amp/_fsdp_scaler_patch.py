"""Makes ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler`` torch_npu's
npu scaler (:class:`torch_npu.npu.amp.sharded_grad_scaler._ShardedGradScaler`), as
torch_npu does, without importing FSDP at ``import torch_npu``.

torch_npu replaces PyTorch's class at import, which means importing FSDP (over a
second here) in every process. Instead, :func:`install` patches the module the
moment a program imports it: at once if it is loaded already, else through a
meta-path finder that runs after the module executed. Code written for
torch_npu (``ShardedGradScaler()`` with its default device) then scales on npu.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Optional, Sequence

__all__ = []

_TARGET = "torch.distributed.fsdp.sharded_grad_scaler"
_OURS = "torch_npu.npu.amp.sharded_grad_scaler"


def _patch_loaded() -> None:
    # Our module patches the target itself at its end (it imports the target,
    # so it may be mid-import right now).
    if _OURS not in sys.modules:
        importlib.import_module(_OURS)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch_loaded()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)  # one module, once: the finder is done
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


def install() -> None:
    r"""Patch PyTorch's FSDP scaler now if it is imported, else when it is."""
    if _TARGET in sys.modules:
        _patch_loaded()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
