"""Run setup code the moment a program imports a module, without importing it.

torch_npu adapts a few of PyTorch's optional subsystems (FSDP's grad scaler,
TorchDynamo) at ``import torch_npu``. Importing them eagerly would cost every
process seconds; :func:`run_after_import` instead runs the adaptation right
after the module's own code has executed: at once if it is loaded already,
else through a one-shot meta-path finder.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Callable, Dict, List, Optional, Sequence

__all__ = ["run_after_import"]

_lock = threading.Lock()
_pending: Dict[str, List[Callable[[], None]]] = {}


def _run(name: str) -> None:
    with _lock:
        callbacks = _pending.pop(name, [])
    for callback in callbacks:
        callback()


class _RunningLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _run(self._name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str) -> None:
        self._name = name

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != self._name:
            return None
        sys.meta_path.remove(self)  # one module, once: the finder is done
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _RunningLoader(spec.loader, fullname)
        return spec


def run_after_import(name: str, callback: Callable[[], None]) -> None:
    r"""Call ``callback()`` once module ``name`` is imported: now if it is loaded,
    else right after its code has run (``callback`` may import it then).

    Thread-safe. An exception raised by ``callback`` propagates to the import
    that triggered it.
    """
    if name in sys.modules:
        callback()
        return
    with _lock:
        first = name not in _pending
        _pending.setdefault(name, []).append(callback)
        if first:
            sys.meta_path.insert(0, _Finder(name))
