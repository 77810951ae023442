"""Expected failures and skips of test_opdb.py, each with its reason.

Keys are op_db op variants as test_opdb names them (``name`` or
``name.variant``). Expected failures are strict: an op that starts passing
fails the run until its entry is removed, so these tables only shrink.
"""

from __future__ import annotations

from typing import Dict

__all__ = ["FORWARD_XFAIL", "FORWARD_XFAIL_LATER_SAMPLES", "GRAD_XFAIL",
           "GRAD_XFAIL_LATER_SAMPLES", "HOST_ARGS", "SKIP", "UNINITIALIZED"]

# Ops whose results are uninitialised memory (by contract, on every device):
# their values are not comparable, so only dtype, shape, layout and device are.
_UNINIT = "returns uninitialised memory by contract: only dtype, shape and device are compared"
UNINITIALIZED: Dict[str, str] = {
    "empty": _UNINIT,
    "empty_like": _UNINIT,
    "empty_strided": _UNINIT,
    "empty_permuted": _UNINIT,
    "new_empty": _UNINIT,
    "new_empty_strided": _UNINIT,
}

# The forward check fails on the first sample.
FORWARD_XFAIL: Dict[str, str] = {}

# The forward check passes on the first sample but fails on a later one
# (applies with NPU_OPDB_SAMPLES=all).
FORWARD_XFAIL_LATER_SAMPLES: Dict[str, str] = {}

# The gradient check fails on the first sample.
GRAD_XFAIL: Dict[str, str] = {}

# The gradient check fails on a later sample only (NPU_OPDB_SAMPLES=all).
GRAD_XFAIL_LATER_SAMPLES: Dict[str, str] = {}

# Not run at all: only for checks that would crash or hang the process, which
# an expected failure cannot contain.
SKIP: Dict[str, str] = {}

# Ops whose tensor args/kwargs (all but the sample's input) are host
# arguments on every device: they stay CPU tensors on npu too.
HOST_ARGS: Dict[str, str] = {
    "tensor_split": "tensor_indices_or_sections is read on the host (a CPU tensor on CUDA too)",
}
