"""PyTorch's own op database (``op_db``, the OpInfo entries of
``torch.testing._internal.common_methods_invocations``) on npu: for every op
whose float32 CPU samples run, npu must give CPU's results — forward, and
gradients where the op supports autograd — with its outputs on npu.

How an op is checked (one pytest id per op variant, e.g. ``add``,
``nn.functional.conv2d``, ``linalg.norm.subgradients_at_zero``):

- Samples are the OpInfo's float32 sample inputs on CPU, generated under a
  fixed seed. By default the first sample whose CPU run succeeds is used (CI);
  ``NPU_OPDB_SAMPLES=all`` checks every sample, ``NPU_OPDB_SAMPLES=<n>`` the
  first n (``make test-ops`` runs all).
- Each run gets its own copy of the inputs (on CPU or npu) with the same
  sizes, strides, storage offsets and aliasing among them, so an op that
  writes into its inputs cannot change what the next run sees, and the
  written inputs are compared as well.
- ``test_forward``: the op's results on npu must be npu tensors of CPU's
  dtype, shape and layout whose values equal CPU's within the float32
  tolerance (torch.testing's default, or the looser one the OpInfo declares
  for float32), NaN equal to NaN; non-tensor results (ints, floats, sizes,
  None, ...) must be equal. A sample that raises on CPU must raise the same
  exception type on npu.
- ``test_grad`` (ops with ``supports_autograd``): a weighted sum of the
  differentiable outputs (weights drawn once on CPU, so that no gradient is
  trivially zero, as it is for softmax under a plain sum) is differentiated
  w.r.t. the sample's differentiable inputs; the gradients must match CPU's
  like results do.
- Randomness is told from the op's behaviour, not from a list: an op whose
  CPU results change with the seed (``torch.manual_seed``) is random; its npu
  results (drawn from the npu generator, which is not CPU's stream of
  numbers) are compared with CPU in dtype, shape, layout and device only, and
  two npu runs under the same seed must give identical values. Ops that
  return uninitialised memory are listed in ``opdb_expectations.UNINITIALIZED``
  and compared by metadata only.

Expected failures and skips live in ``opdb_expectations.py``, each with its
reason; expected failures are strict, so a fix fails the run until its entry
is removed.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
import torch
import torch_npu  # noqa: F401  (registers the npu device)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo, SampleInput
from torch.utils._python_dispatch import TorchDispatchMode

import opdb_expectations as expect

DEVICE = "npu"
DTYPE = torch.float32
SEED = 0
# torch.testing.assert_close's defaults for float32.
DEFAULT_RTOL, DEFAULT_ATOL = 1.3e-6, 1e-5


def op_key(op: OpInfo) -> str:
    """The pytest id of an op variant: ``name`` or ``name.variant``."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def samples_wanted() -> Optional[int]:
    """How many CPU-runnable samples to check per op: None means all."""
    value = os.environ.get("NPU_OPDB_SAMPLES", "1").strip().lower()
    if value == "all":
        return None
    count = int(value)
    assert count >= 1, f"NPU_OPDB_SAMPLES must be 'all' or >= 1, got {value!r}"
    return count


ALL_SAMPLES = samples_wanted() is None


def float32_tolerance(op: OpInfo) -> Tuple[float, float]:
    """(rtol, atol): the default, loosened by any float32 tolerance the OpInfo
    declares for CPU (toleranceOverride and precisionOverride decorators)."""
    rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
    for info in getattr(op, "decorators", ()):
        if getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        dtypes = getattr(info, "dtypes", None)
        if dtypes is not None and DTYPE not in dtypes:
            continue
        for decorator in getattr(info, "decorators", ()):
            declared = getattr(decorator, "d", None)
            tol = declared.get(DTYPE) if isinstance(declared, dict) else None
            if isinstance(tol, float):  # precisionOverride: an atol
                atol = max(atol, tol)
            elif tol is not None:  # toleranceOverride: (atol, rtol)
                rtol, atol = max(rtol, tol.rtol), max(atol, tol.atol)
    return rtol, atol


# --- moving samples between devices -------------------------------------------


class Mirror:
    """Copies a sample's values to a device, keeping each tensor's sizes,
    strides and storage offset, and the storages tensors share (one copy per
    CPU storage), so that views and in-place ops see what they see on CPU.

    Tensors that require grad become leaves of the copy that require grad.
    The strings and devices "cpu" become the target device (factory ops take
    their device as an argument). With ``host_args``, the tensors among the
    sample's args and kwargs stay CPU tensors (copied), as the op requires.
    ``moved`` tells whether anything went to the device: a sample of plain
    numbers (``arange(2)``) makes CPU tensors on every device.
    """

    def __init__(self, device: str, host_args: bool = False) -> None:
        self.device = device
        self.host_args = host_args
        self.moved = False
        self._storages: Dict[Tuple[int, int, str], torch.Tensor] = {}
        self._tensors: Dict[Tuple[int, str], torch.Tensor] = {}

    def sample(self, sample: SampleInput) -> Tuple[Any, Any, Any]:
        """(input, args, kwargs) of ``sample`` on the device."""
        rest = "cpu" if self.host_args else self.device
        return (self.copy(sample.input, self.device), self.copy(sample.args, rest),
                self.copy(sample.kwargs, rest))

    def copy(self, value: Any, device: str) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, device)
        if isinstance(value, torch.device) and value.type == "cpu":
            self.moved = True
            return torch.device(self.device)
        if isinstance(value, str) and value == "cpu":
            self.moved = True
            return self.device
        if isinstance(value, dict):
            return {k: self.copy(v, device) for k, v in value.items()}
        if isinstance(value, list):
            return [self.copy(v, device) for v in value]
        if isinstance(value, tuple):
            items = [self.copy(v, device) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        return value

    def _tensor(self, t: torch.Tensor, device: str) -> torch.Tensor:
        self.moved |= device == self.device
        key = (id(t), device)
        if key not in self._tensors:
            copy = self._copy(t.detach(), device)
            if t.requires_grad:
                copy.requires_grad_(True)
            self._tensors[key] = copy
        return self._tensors[key]

    def _copy(self, t: torch.Tensor, device: str) -> torch.Tensor:
        strided = t.layout == torch.strided and not t.is_conj() and not t.is_neg()
        storage = t.untyped_storage() if strided else None
        if not strided or t.is_quantized or storage.nbytes() % t.element_size():
            return t.clone() if device == "cpu" else t.to(device)
        key = (storage.data_ptr(), storage.nbytes(), device)
        base = self._storages.get(key)
        if base is None or base.dtype != t.dtype:
            whole = t.as_strided((storage.nbytes() // t.element_size(),), (1,), 0)
            base = whole.clone() if device == "cpu" else whole.to(device)
            self._storages[key] = base
        return base.as_strided(t.shape, t.stride(), t.storage_offset()).detach()


def flatten(value: Any) -> Iterator[Any]:
    """The leaves of nested lists, tuples and dicts."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from flatten(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from flatten(v)
    else:
        yield value


def tensors(value: Any) -> List[torch.Tensor]:
    return [t for t in flatten(value) if isinstance(t, torch.Tensor)]


class SeededOpRecorder(TorchDispatchMode):
    """Records whether any ATen op that draws random numbers ran (ops tagged
    ``nondeterministic_seeded``: bernoulli, normal_, randn, native_dropout,
    ...), whatever the OpInfo wraps them in (some reseed the generator to a
    fixed seed and restore it, which hides them from the outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random = True
        return func(*args, **(kwargs or {}))


def call(op: OpInfo, sample: SampleInput, mirror: Mirror,
         recorder: Optional[SeededOpRecorder] = None) -> Tuple[Any, List[torch.Tensor],
                                                              List[torch.Tensor]]:
    """Runs op on ``mirror``'s copy of sample, all generators seeded with SEED.
    Returns (result, the copied tensor arguments on the mirror's device, the
    copied tensor arguments that require grad)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        inp, args, kwargs = mirror.sample(sample)
        if recorder is None:
            result = op(inp, *args, **kwargs)
        else:
            with recorder:
                result = op(inp, *args, **kwargs)
    # Host arguments are the caller's business, not the op's results.
    on_device = tensors(inp) + ([] if mirror.host_args else tensors((args, kwargs)))
    return result, on_device, [t for t in tensors((inp, args, kwargs)) if t.requires_grad]


# --- comparing results ---------------------------------------------------------


def detached(value: Any) -> Any:
    """value with every tensor detached (results are compared, not differentiated)."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        items = [detached(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    return value


def compare(expected: Any, actual: Any, tol: Tuple[float, float], values: bool = True,
            path: str = "result", device: str = DEVICE) -> None:
    """Asserts that ``actual`` (npu) matches ``expected`` (CPU): same structure,
    tensors on ``device`` of the same dtype, shape and layout, equal values
    (within tol; NaN == NaN) unless ``values`` is False."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: npu gave {type(actual).__name__}"
        assert actual.device.type == device, f"{path}: on {actual.device}, expected {device}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, (
            f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
        assert actual.layout == expected.layout, f"{path}: layout {actual.layout}"
        if values:
            # Sparse results are compared by their dense values: the same
            # tensor may be stored with other (uncoalesced) indices.
            def dense(t: torch.Tensor) -> torch.Tensor:
                t = t.detach()
                return t.cpu() if t.layout == torch.strided else t.to_dense().cpu()

            rtol, atol = tol
            torch.testing.assert_close(dense(actual), dense(expected), rtol=rtol, atol=atol,
                                       equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (
            f"{path}: npu gave {type(actual).__name__} of "
            f"{len(actual) if isinstance(actual, (list, tuple)) else '-'} items, "
            f"CPU {type(expected).__name__} of {len(expected)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, tol, values, f"{path}[{i}]", device)
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), f"{path}: keys"
        for k in expected:
            compare(expected[k], actual[k], tol, values, f"{path}[{k!r}]", device)
        return
    if isinstance(expected, torch.device):  # results that name the device
        assert isinstance(actual, torch.device) and actual.type == device, f"{path}: {actual}"
        return
    if isinstance(expected, float) and isinstance(actual, float):
        rtol, atol = tol
        same = (math.isnan(expected) and math.isnan(actual)) or math.isclose(
            actual, expected, rel_tol=rtol, abs_tol=atol)
        assert same or not values, f"{path}: {actual} != {expected}"
        return
    assert type(actual) is type(expected), (
        f"{path}: npu gave {type(actual).__name__}, CPU {type(expected).__name__}")
    assert actual == expected or not values, f"{path}: {actual!r} != {expected!r}"


# --- running an op -------------------------------------------------------------


def samples(op: OpInfo, requires_grad: bool) -> Iterator[SampleInput]:
    """The op's float32 CPU samples, deterministically (fixed seed; running
    the op between two samples does not change the next one)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        yield from op.sample_inputs("cpu", DTYPE, requires_grad=requires_grad)


def check_samples(op: OpInfo, check_one: Callable[[SampleInput], Optional[BaseException]],
                  requires_grad: bool) -> None:
    """Runs check_one on the op's samples: every sample if NPU_OPDB_SAMPLES=all,
    else until the wanted number of samples ran on CPU (check_one returns the
    CPU run's exception, or None; samples that fail on CPU are checked for
    failing on npu the same way)."""
    wanted = samples_wanted()
    ran = tried = 0
    error: Optional[BaseException] = None
    for sample in samples(op, requires_grad):
        tried += 1
        cpu_error = check_one(sample)
        ran += cpu_error is None
        error = error or cpu_error
        if wanted is not None and ran >= wanted:
            break
    if tried == 0:
        pytest.skip("the OpInfo has no float32 sample on CPU")
    if ran == 0:
        pytest.skip(f"none of the {tried} float32 samples runs on CPU, e.g. "
                    f"{type(error).__name__}: {first_line(error)} (npu raises the same)")


def capture(fn: Callable[[], Any]) -> Tuple[Any, Optional[BaseException]]:
    """(fn(), None), or (None, the exception fn raised)."""
    try:
        return fn(), None
    except Exception as e:  # the op's own error: compared with npu's
        return None, e


def assert_same_failure(cpu_error: BaseException, npu_call: Callable[[], Any]) -> None:
    """A sample that fails on CPU must fail on npu with the same exception type."""
    _, npu_error = capture(npu_call)
    assert npu_error is not None, (
        f"CPU raised {type(cpu_error).__name__}: {first_line(cpu_error)}; npu succeeded")
    assert isinstance(npu_error, type(cpu_error)), (
        f"CPU raised {type(cpu_error).__name__}: {first_line(cpu_error)}; npu raised "
        f"{type(npu_error).__name__}: {first_line(npu_error)}")


def first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else ""


# --- forward -------------------------------------------------------------------


def check_forward(op: OpInfo, sample: SampleInput, key: str) -> Optional[BaseException]:
    """Checks one sample forward; returns the CPU run's exception, if any."""
    tol = float32_tolerance(op)
    host_args = key in expect.HOST_ARGS

    moved = [False]  # whether the npu run's sample had anything on npu

    def run(device: str, recorder: Optional[SeededOpRecorder] = None) -> Tuple[Any, Any]:
        mirror = Mirror(device, host_args)  # fresh copies for every run
        result, arguments, _ = call(op, sample, mirror, recorder)
        moved[0] = mirror.moved
        if device != "cpu":
            torch.npu.synchronize()  # a failing task is reported here
        # The arguments too: an op that writes into them must write the same.
        return detached(result), [a.detach() for a in arguments]

    recorder = SeededOpRecorder()
    cpu, cpu_error = capture(lambda: run("cpu", recorder))
    if cpu_error is not None:
        assert_same_failure(cpu_error, lambda: run(DEVICE))
        return cpu_error
    npu = run(DEVICE)
    device = DEVICE if moved[0] else "cpu"
    values = not recorder.random and key not in expect.UNINITIALIZED
    compare(cpu, npu, tol, values=values, device=device)
    if recorder.random:
        # npu draws from its own generator, not CPU's stream of numbers; under
        # the same seed it must draw the same numbers again.
        compare(npu, run(DEVICE), (0.0, 0.0), path="npu rerun", device=device)
    return None


# --- gradients -----------------------------------------------------------------


def differentiable(value: Any) -> List[torch.Tensor]:
    """The outputs a loss can be built from: floating tensors that require grad."""
    return [t for t in tensors(value) if t.requires_grad
            and (t.is_floating_point() or t.is_complex())]


def grad_weights(outputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """One fixed pseudo-random weight tensor per output (CPU)."""
    g = torch.Generator().manual_seed(SEED + 7)
    return [torch.randn((o.real if o.is_complex() else o).shape, generator=g) for o in outputs]


def backward(op: OpInfo, sample: SampleInput, device: str, host_args: bool,
             weights: Optional[List[torch.Tensor]],
             recorder: Optional[SeededOpRecorder] = None) -> Tuple[Any, List[Any], List[Any]]:
    """(outputs, gradients w.r.t. the sample's inputs that require grad (None
    where unused), the weights used) of sum(weight * output) over the
    differentiable outputs; the weights are drawn if not given."""
    with contextlib.nullcontext() if recorder is None else recorder:
        result, _, leaves = call(op, sample, Mirror(device, host_args))
        outputs = differentiable(sample.output_process_fn_grad(result))
    if weights is None:
        weights = grad_weights(outputs)
    assert len(weights) == len(outputs), (
        f"{len(outputs)} differentiable outputs, CPU had {len(weights)}")
    grads: List[Any] = []
    with contextlib.nullcontext() if recorder is None else recorder:
        if outputs and leaves:
            loss = sum(((o.real if o.is_complex() else o) * w.to(o.device)).sum()
                       for o, w in zip(outputs, weights))
            grads = [None if g is None else g.detach() for g in
                     torch.autograd.grad(loss, leaves, allow_unused=True)]
    if device != "cpu":
        torch.npu.synchronize()
    return detached(result), grads, weights


def check_grad(op: OpInfo, sample: SampleInput, key: str) -> Optional[BaseException]:
    """Checks one sample's gradients; returns the CPU run's exception, if any."""
    tol = float32_tolerance(op)
    host_args = key in expect.HOST_ARGS
    recorder = SeededOpRecorder()
    cpu, cpu_error = capture(lambda: backward(op, sample, "cpu", host_args, None, recorder))
    if cpu_error is not None:
        assert_same_failure(cpu_error, lambda: backward(op, sample, DEVICE, host_args, None))
        return cpu_error
    _, grads, weights = cpu
    npu_grads = backward(op, sample, DEVICE, host_args, weights)[1]
    values = not recorder.random and key not in expect.UNINITIALIZED
    compare(grads, npu_grads, tol, values=values, path="grad")
    if recorder.random:  # see check_forward
        compare(npu_grads, backward(op, sample, DEVICE, host_args, weights)[1], (0.0, 0.0),
                path="npu rerun grad")
    return None


# --- the tests -----------------------------------------------------------------


def params(ops: Sequence[OpInfo], xfails: Dict[str, str]) -> List[Any]:
    """One pytest param per op, marked from opdb_expectations."""
    out = []
    for op in ops:
        key = op_key(op)
        marks = []
        if key in expect.SKIP:
            marks.append(pytest.mark.skip(reason=expect.SKIP[key]))
        elif key in xfails:
            marks.append(pytest.mark.xfail(reason=xfails[key], strict=True))
        out.append(pytest.param(op, id=key, marks=marks))
    return out


def float32_ops() -> List[OpInfo]:
    return [op for op in op_db if DTYPE in op.supported_dtypes("cpu")]


def forward_xfails() -> Dict[str, str]:
    xfails = dict(expect.FORWARD_XFAIL)
    if not ALL_SAMPLES:
        return xfails
    xfails.update(expect.FORWARD_XFAIL_LATER_SAMPLES)
    return xfails


def grad_xfails() -> Dict[str, str]:
    xfails = dict(expect.GRAD_XFAIL)
    if not ALL_SAMPLES:
        return xfails
    xfails.update(expect.GRAD_XFAIL_LATER_SAMPLES)
    return xfails


@pytest.mark.parametrize("op", params(float32_ops(), forward_xfails()))
def test_forward(op: OpInfo) -> None:
    """npu gives CPU's results for the op's float32 samples (see the module doc)."""
    key = op_key(op)
    check_samples(op, lambda s: check_forward(op, s, key), requires_grad=False)


@pytest.mark.parametrize("op", params([op for op in float32_ops() if op.supports_autograd],
                                      grad_xfails()))
def test_grad(op: OpInfo) -> None:
    """npu gives CPU's gradients for the op's float32 samples (see the module doc)."""
    key = op_key(op)
    check_samples(op, lambda s: check_grad(op, s, key), requires_grad=True)


def test_expectations_name_existing_ops() -> None:
    """Every entry of opdb_expectations names an op variant of op_db (a renamed
    op must not leave a stale entry behind) and gives a reason."""
    keys = {op_key(op) for op in op_db}
    for table in (expect.FORWARD_XFAIL, expect.FORWARD_XFAIL_LATER_SAMPLES, expect.GRAD_XFAIL,
                  expect.GRAD_XFAIL_LATER_SAMPLES, expect.SKIP, expect.UNINITIALIZED,
                  expect.HOST_ARGS):
        for key, reason in table.items():
            assert key in keys, f"{key}: not an op_db op variant"
            assert reason.strip(), f"{key}: no reason given"
