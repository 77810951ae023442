"""The options of :meth:`NPUGraph.super_kernel_optimize`, and their checks.

torch_npu hands them to CANN's super-kernel compiler (``aclskOptimize``). The
keys, the value types and the messages are torch_npu's, so that a program
with a bad option fails here as it fails there, before anything is run.
"""

from typing import Any, Dict, Optional, Tuple

__all__ = ["check_super_kernel_options"]

# key -> (value type, element or sub-option types)
_Schema = Dict[str, Tuple[type, Any]]

_OPTIMIZE: _Schema = {
    "preload_code": (int, None),
    "split_mode": (int, None),
    "stream_fusion": (int, None),
    "constant_codegen": (int, None),
    "auto_op_parallel": (int, None),
    "early_start": (int, None),
    "opt_extend": (str, None),
    "dcci_before_kernel_start": (list, str),
    "dcci_after_kernel_end": (list, str),
    "dcci_disable_on_kernel": (list, str),
    "ubuf_lock_ignore_kernel": (list, str),
    "aggressive_opt_strategies": (dict, {
        "event_breaker_bypass": int,
        "value_breaker_bypass": int,
        "task_breaker_bypass": int,
    }),
}

_DEBUG: _Schema = {
    "debug_sync_all": (int, None),
    "debug_op_exec_trace": (int, None),
    "debug_cross_core_sync_check": (int, None),
    "debug_per_op_max_core_num": (int, None),
    "debug_extend": (str, None),
}

_SCHEMAS = {"optimize_options": _OPTIMIZE, "debug_options": _DEBUG}


def _check(option_name: str, options: Optional[Dict[str, Any]]) -> None:
    if options is None:
        return
    if not isinstance(options, dict):
        raise RuntimeError(f"{option_name} param must be dict or None.")
    schema = _SCHEMAS[option_name]
    for key, value in options.items():
        if key not in schema:
            raise RuntimeError(f"Invalid {option_name} param key: '{key}'. Valid keys: {sorted(schema)}")
        expected, inner = schema[key]
        if not isinstance(value, expected):
            raise RuntimeError(
                f"{option_name} param['{key}'] must be {expected.__name__}, got {type(value).__name__}"
            )
        if expected is dict:
            for sub_key, sub_value in value.items():
                if sub_key not in inner:
                    raise RuntimeError(f"Invalid sub_key '{sub_key}' in {option_name}['{key}'].")
                if not isinstance(sub_value, inner[sub_key]):
                    raise RuntimeError(
                        f"{option_name}['{key}']['{sub_key}'] must be {inner[sub_key].__name__}, "
                        f"got {type(sub_value).__name__}"
                    )
        elif expected is list:
            for i, element in enumerate(value):
                if not isinstance(element, inner):
                    raise RuntimeError(
                        f"{option_name}['{key}'][{i}] must be {inner.__name__}, got {type(element).__name__}"
                    )


def check_super_kernel_options(optimize_options: Optional[Dict[str, Any]],
                               debug_options: Optional[Dict[str, Any]]) -> None:
    r"""Raise ``RuntimeError`` naming the first bad option: a non-dict, an unknown
    key or sub-key, or a value (or list element) of the wrong type."""
    _check("optimize_options", optimize_options)
    _check("debug_options", debug_options)
