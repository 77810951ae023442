r"""torch_npu's mstx markers and ranges (``torch_npu.npu.mstx``): Ascend's NVTX.

Marks and ranges name points and spans of a program in profiles. Here they reach
:mod:`torch.profiler`: on the host as user annotations (what
``torch.profiler.record_function`` makes), and, given a stream, also as do-nothing tasks named
``"mstx: <message>"`` in that stream's work, so the stream's row of the profile shows where the
stream was when the program got there (Note [Markers on the simulator] in
``csrc/profiler/Mstx.h``).

As torch_npu's, these functions never raise: they are meant to stay in training code, so an
invalid argument is a warning and the function returns its failure value (0 for
``range_start``, -1 for ``range_push`` / ``range_pop``).
"""

import functools
import warnings
from typing import Any, Callable, Optional, TypeVar

import torch

import torch_npu._C

__all__ = ["mstx", "annotate"]

_T = TypeVar("_T")


def _never_raises(failure: Any = None) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """Turn an exception of the wrapped function into a warning and ``failure``."""

    def decorate(func: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - a marker must not stop the program
                warnings.warn(f"mstx.{func.__name__} failed: {error}", RuntimeWarning, stacklevel=2)
                return failure

        return wrapper

    return decorate


def _bad(what: str, function: str, stacklevel: int = 5) -> None:
    # 5: past this helper, the validating helper, the public method and _never_raises.
    warnings.warn(f"Invalid {what} for mstx.{function}; the call does nothing.",
                  stacklevel=stacklevel)


def _valid_message(message: Any, function: str) -> bool:
    if isinstance(message, str) and message:
        return True
    _bad("message (a non-empty string is needed)", function)
    return False


def _valid_domain(domain: Any, function: str, allow_empty: bool = False) -> bool:
    if isinstance(domain, str) and (domain or allow_empty):
        return True
    _bad("domain (a non-empty string is needed)", function)
    return False


def _stream_triple(stream: Any, function: str) -> Optional[tuple]:
    if isinstance(stream, torch.Stream) and stream.device.type == "npu":
        return (stream.stream_id, stream.device_index, stream.device_type)
    _bad("stream (an npu stream is needed)", function)
    return None


class mstx:
    r"""torch_npu's marker API: every function is a static method."""

    @staticmethod
    @_never_raises()
    def mark(message: str, stream: Optional[torch.Stream] = None, domain: str = "default") -> None:
        r"""Mark the present point of the program, and of ``stream``'s work if given."""
        if not _valid_message(message, "mark") or not _valid_domain(domain, "mark", True):
            return
        if stream is None:
            torch_npu._C._mstx._mark_on_host(message, domain)
            return
        triple = _stream_triple(stream, "mark")
        if triple is not None:
            torch_npu._C._mstx._mark(message, *triple, domain)

    @staticmethod
    @_never_raises(failure=-1)
    def range_push(message: str, stream: Optional[torch.Stream] = None, domain: str = "default") -> int:
        r"""Open a range nested in this thread's open ranges of ``domain``; its depth (0 outermost), or -1."""
        if not _valid_message(message, "range_push") or not _valid_domain(domain, "range_push"):
            return -1
        if stream is None:
            return torch_npu._C._mstx._range_push_on_host(message, domain)
        triple = _stream_triple(stream, "range_push")
        return -1 if triple is None else torch_npu._C._mstx._range_push(message, *triple, domain)

    @staticmethod
    @_never_raises(failure=-1)
    def range_pop(domain: str = "default") -> int:
        r"""Close this thread's innermost range of ``domain``; its depth, or -1 if none is open."""
        if not _valid_domain(domain, "range_pop"):
            return -1
        return torch_npu._C._mstx._range_pop(domain)

    @staticmethod
    @_never_raises(failure=0)
    def range_start(message: str, stream: Optional[torch.Stream] = None, domain: str = "default") -> int:
        r"""Start a range, ended by :meth:`range_end` with the id returned (> 0; 0 on invalid input)."""
        if not _valid_message(message, "range_start") or not _valid_domain(domain, "range_start"):
            return 0
        if stream is None:
            return torch_npu._C._mstx._range_start_on_host(message, domain)
        triple = _stream_triple(stream, "range_start")
        return 0 if triple is None else torch_npu._C._mstx._range_start(message, *triple, domain)

    @staticmethod
    @_never_raises()
    def range_end(range_id: int, domain: str = "default") -> None:
        r"""End the range :meth:`range_start` returned ``range_id`` for (an unknown id does nothing)."""
        if not isinstance(range_id, int) or isinstance(range_id, bool):
            _bad("range id (the value range_start returned is needed)", "range_end", stacklevel=4)
            return
        if not _valid_domain(domain, "range_end"):
            return
        torch_npu._C._mstx._range_end(range_id, domain)

    @staticmethod
    def mstx_range(message: str, stream: Optional[torch.Stream] = None,
                   domain: str = "default") -> Callable[[Callable[..., _T]], Callable[..., _T]]:
        r"""Decorator: each call of the function is a range named ``message``."""
        return annotate(message, stream, domain)


class annotate:
    r"""A range as a context manager or a decorator (named after the function if no message)."""

    def __init__(self, message: str = "", stream: Optional[torch.Stream] = None,
                 domain: str = "default") -> None:
        self.message = message
        self.stream = stream
        self.domain = domain
        self.range_id: Optional[int] = None

    def __enter__(self) -> "annotate":
        self.range_id = mstx.range_start(self.message, self.stream, self.domain)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.range_id:
            mstx.range_end(self.range_id, self.domain)
        self.range_id = None

    def __call__(self, func: Callable[..., _T]) -> Callable[..., _T]:
        message = self.message or func.__name__

        @functools.wraps(func)
        def inner(*args: Any, **kwargs: Any) -> _T:
            range_id = mstx.range_start(message, self.stream, self.domain)
            try:
                return func(*args, **kwargs)
            finally:
                if range_id:
                    mstx.range_end(range_id, self.domain)

        return inner


mstx.annotate = annotate  # type: ignore[attr-defined]
