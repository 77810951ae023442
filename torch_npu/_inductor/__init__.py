"""``torch_npu._inductor``: torch.compile's default backend (Inductor) on npu.

Importing it registers Inductor's npu device op overrides and makes
``torch.compile(fn)`` (``backend="inductor"``, the default) compile graphs over
npu tensors with :func:`compile_fx_npu`: Inductor's CPU code, run as one task on
the current npu stream per graph (Note [Compiled npu graphs run as stream tasks]
in ``_compile.py``). ``torch.compile`` imports it by itself on its first npu
graph; torch_npu's tests import it explicitly, as with torch_npu.
"""

from . import _device_op_overrides  # noqa: F401  (registers the npu op overrides)
from ._compile import compile_fx_npu, is_npu_graph

__all__ = ["compile_fx_npu", "is_npu_graph"]
