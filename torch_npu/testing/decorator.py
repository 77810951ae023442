"""Parametrising decorators of torch_npu's test files (``torch_npu.testing.decorator``).

``@Dtypes(torch.float16, torch.float32)`` and ``@Formats(0, 2)`` mark a test
method with the values it runs for; ``@instantiate_tests`` on the class then
replaces each marked method by one method per combination, named
``<name>_<dtype>[_<format>]`` (``test_add_float16_2``), which calls the
original with the value of each key passed to the parameter whose name
contains the key (``dtype``, ``npu_format``), and ``device="npu"`` when it has
a ``device`` parameter. Formats are torch_npu's private storage formats; the
simulator stores every tensor in its plain layout, so a format only names the
test, as on a tensor whose format is the default.
"""

import functools
import inspect
import itertools
from typing import Any, Callable, Dict, List, Sequence, Tuple, TypeVar

import torch

__all__ = ["Dtypes", "Formats", "instantiate_tests"]

_Cls = TypeVar("_Cls", bound=type)


class Dtypes:
    r"""Marks a test method with the dtypes it runs for (see :func:`instantiate_tests`)."""

    def __init__(self, *dtypes: torch.dtype) -> None:
        if not dtypes:
            raise RuntimeError("No dtypes given")
        if not all(isinstance(d, torch.dtype) for d in dtypes):
            raise RuntimeError(f"Unknown dtype in {dtypes}")
        self.args = dtypes

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.dtypes = self.args  # type: ignore[attr-defined]
        return fn


class Formats:
    r"""Marks a test method with the storage formats it runs for (see :func:`instantiate_tests`)."""

    def __init__(self, *formats: Any) -> None:
        if not formats:
            raise RuntimeError("No formats given")
        self.args = formats

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.formats = self.args  # type: ignore[attr-defined]
        return fn


def _suffix(key: str, value: Any) -> str:
    return str(value).split(".")[1] if key == "dtype" else str(value)


def _parameter_for(key: str, parameters: Sequence[str], cls_name: str, name: str) -> str:
    matches = [p for p in parameters if key in p]
    if len(matches) != 1:
        raise RuntimeError(
            f"{cls_name}.{name}: instantiate_tests needs exactly one parameter whose name contains "
            f"{key!r} to pass the {key} to, but the method has {matches or 'none'}"
        )
    return matches[0]


def _bound(fn: Callable[..., Any], name: str, kwargs: Dict[str, Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def test(self: Any) -> Any:
        return fn(self, **kwargs)

    test.__name__ = test.__qualname__ = name
    return test


def instantiate_tests(cls: _Cls) -> _Cls:
    r"""Class decorator: one test method per combination of each marked method's dtypes and formats."""
    for name, fn in list(vars(cls).items()):
        keys: List[Tuple[str, Sequence[Any]]] = []
        if hasattr(fn, "dtypes"):
            keys.append(("dtype", fn.dtypes))
        if hasattr(fn, "formats"):
            keys.append(("format", fn.formats))
        if not keys:
            continue
        parameters = inspect.getfullargspec(fn).args
        targets = [_parameter_for(key, parameters, cls.__name__, name) for key, _ in keys]
        for combination in itertools.product(*(values for _, values in keys)):
            kwargs: Dict[str, Any] = {"device": "npu"} if "device" in parameters else {}
            kwargs.update(zip(targets, combination))
            test_name = name + "".join("_" + _suffix(key, value) for (key, _), value in zip(keys, combination))
            setattr(cls, test_name, _bound(fn, test_name, kwargs))
        delattr(cls, name)
    return cls
