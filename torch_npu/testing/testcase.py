r"""``TestCase`` and ``run_tests`` as torch_npu's test suite has them.

Test files written for torch_npu (``from torch_npu.testing.testcase import
TestCase, run_tests``) run unchanged, under ``python file.py`` (``run_tests``)
and under pytest (plain ``unittest.TestCase`` subclasses).

- ``setUpClass`` selects the device from ``SET_NPU_DEVICE`` (default 0);
- ``setUp`` seeds torch, ``random`` and numpy (if installed) from ``SEED``
  (default 666);
- ``assertEqual(x, y, prec=None, message='', ...)`` compares tensors (on any
  device), numbers and sequences with tolerance ``prec`` (default: the case's
  ``precision``, 1e-5);
- ``assertRtolEqual(x, y, prec=1e-4, prec16=1e-3)`` compares with a relative
  tolerance, as torch_npu's operator tests do.

Importing this module does not initialise the device.
"""

import os
import random
import sys
import unittest
from numbers import Number
from typing import Any, Optional

import expecttest
import torch

from .common_utils import set_npu_device

__all__ = ["TestCase", "run_tests"]


def run_tests() -> None:
    r"""Run the tests of the calling module (``unittest.main``)."""
    unittest.main(argv=sys.argv)


def _to_cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    try:
        import numpy as np

        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
    except ImportError:  # pragma: no cover - numpy is optional
        pass
    return x


class TestCase(expecttest.TestCase):
    r"""torch_npu's test base class, for the simulated NPU."""

    _precision = 1e-5
    maxDiff = None
    exact_dtype = False
    npu_device = "npu:0"

    @property
    def precision(self) -> float:
        return self._precision

    @precision.setter
    def precision(self, prec: float) -> None:
        self._precision = prec

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.npu_device = set_npu_device()

    def setUp(self) -> None:
        super().setUp()
        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            import numpy as np

            np.random.seed(seed)
        except ImportError:  # pragma: no cover - numpy is optional
            pass

    def assertEqual(  # type: ignore[override]
        self,
        x: Any,
        y: Any,
        prec: Optional[float] = None,
        message: str = "",
        allow_inf: bool = False,
        exact_dtype: Optional[bool] = None,
        **kwargs: Any,
    ) -> None:
        if "msg" in kwargs and not message:
            message = kwargs.pop("msg") or ""
        if isinstance(prec, str) and message == "":  # assertEqual(x, y, "message"), as torch_npu allows
            message, prec = prec, None
        if prec is None:
            prec = self.precision
        if exact_dtype is None:
            exact_dtype = self.exact_dtype
        x, y = _to_cpu(x), _to_cpu(y)
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor):
                x = torch.as_tensor(x, dtype=y.dtype)
            if not isinstance(y, torch.Tensor):
                y = torch.as_tensor(y, dtype=x.dtype)
            self.assertEqual(tuple(x.shape), tuple(y.shape), message=message)
            if exact_dtype:
                super().assertEqual(x.dtype, y.dtype, message)
            if x.dtype == torch.bool or y.dtype == torch.bool:
                super().assertTrue(torch.equal(x.to(torch.bool), y.to(torch.bool)), message)
                return
            if x.numel() == 0:
                return
            common = torch.promote_types(x.dtype, y.dtype)
            if common.is_complex:
                a, b = x.to(torch.complex128), y.to(torch.complex128)
            else:
                a, b = x.to(torch.float64), y.to(torch.float64)
            nan_a, nan_b = torch.isnan(a), torch.isnan(b)
            super().assertTrue(torch.equal(nan_a, nan_b), f"NaN positions differ. {message}")
            a = torch.where(nan_a, torch.zeros_like(a), a)
            b = torch.where(nan_b, torch.zeros_like(b), b)
            inf_a = torch.isinf(a)
            if allow_inf or inf_a.any():
                super().assertTrue(torch.equal(inf_a, torch.isinf(b)) and torch.equal(a[inf_a], b[inf_a]),
                                   f"inf values differ. {message}")
                a = torch.where(inf_a, torch.zeros_like(a), a)
                b = torch.where(torch.isinf(b), torch.zeros_like(b), b)
            max_err = (a - b).abs().max().item() if a.numel() else 0.0
            self.assertLessEqual(max_err, prec, message)
        elif isinstance(x, Number) and isinstance(y, Number) and not isinstance(x, bool):
            if isinstance(x, complex) or isinstance(y, complex):
                self.assertLessEqual(abs(x - y), prec, message)
            elif x != x or y != y:  # NaN
                super().assertTrue(x != x and y != y, message)
            elif x in (float("inf"), float("-inf")) or y in (float("inf"), float("-inf")):
                super().assertEqual(x, y, message)
            else:
                self.assertLessEqual(abs(x - y), prec, message)
        elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            super().assertEqual(len(x), len(y), message)
            for xi, yi in zip(x, y):
                self.assertEqual(xi, yi, prec, message, allow_inf, exact_dtype)
        elif isinstance(x, dict) and isinstance(y, dict):
            super().assertEqual(set(x.keys()), set(y.keys()), message)
            for k in x:
                self.assertEqual(x[k], y[k], prec, message, allow_inf, exact_dtype)
        else:
            super().assertEqual(x, y, message)

    def assertNotEqual(self, x: Any, y: Any, prec: Optional[float] = None, message: str = "") -> None:  # type: ignore[override]
        if isinstance(prec, str) and message == "":
            message, prec = prec, None
        try:
            self.assertEqual(x, y, prec, message)
        except AssertionError:
            return
        raise AssertionError(f"{x!r} == {y!r}. {message}")

    def assertRtolEqual(
        self,
        x: Any,
        y: Any,
        prec: float = 1.0e-4,
        prec16: float = 1.0e-3,
        auto_trans_dtype: bool = False,
        message: Optional[str] = None,
    ) -> None:
        r"""Relative comparison: ``|x - y| <= prec * |y|`` elementwise (``prec16`` for half types)."""
        x, y = _to_cpu(x), _to_cpu(y)
        x = torch.as_tensor(x)
        y = torch.as_tensor(y)
        if auto_trans_dtype:
            x = x.to(y.dtype)
        self.assertEqual(tuple(x.shape), tuple(y.shape), message=message or "")
        if x.dtype == torch.bool or y.dtype == torch.bool:
            super().assertTrue(torch.equal(x.to(torch.bool), y.to(torch.bool)), message)
            return
        tol = prec16 if x.dtype in (torch.float16, torch.bfloat16) else prec
        a, b = x.to(torch.float64), y.to(torch.float64)
        if a.numel() == 0:
            return
        err = (a - b).abs()
        bound = tol * torch.maximum(b.abs(), torch.ones_like(b))
        bad = int((err > bound).sum().item())
        super().assertEqual(bad, 0, message or f"{bad} element(s) exceed the relative tolerance {tol}")
