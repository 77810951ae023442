"""Shared fixtures of the Python suite of the npu backend.

- ``run_py``: run a code snippet in a fresh interpreter with extra environment
  variables (task-queue modes, NPU_SIM_TASK_DELAY_US, ...), returning the
  CompletedProcess; the snippet imports torch and torch_npu itself.
- ``npurt``: the runtime library (libnpurt.so, the one this process loaded)
  through ctypes, for reading runtime state the Python API does not expose.
- ``StreamGate`` / ``gate``: block a stream until released, to prove that work
  runs on the device executor and not on the calling thread. Uses
  ``torch_npu._C._testing_block_stream`` when the build has it, otherwise a
  host function launched through the runtime's C API that waits on a
  ``threading.Event``.
- an autouse fixture that leaves every test on device 0 with default streams
  current and checks, after the test, that the devices still work and, with
  npurt's race detector on (``NPU_SIM_RACECHECK``, ``make test-racecheck``),
  that the test caused no race report.
- ``@pytest.mark.racy(reason=...)``: a test that races on purpose; skipped
  while the race detector is on.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from typing import Dict, Optional

import pytest
import torch
import torch_npu

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where the torch_npu under test was imported from: REPO_ROOT in a normal run.
# Subprocesses import the same package.
PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torch_npu.__file__)))


def _npu_type_int() -> int:
    s = torch_npu.npu.default_stream(0)
    return int(s.device_type)


NPU_DEVICE_TYPE = _npu_type_int()


def _subprocess_env(extra: Optional[Dict[str, str]]) -> Dict[str, str]:
    env = dict(os.environ)
    for k in ("TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING", "PER_STREAM_QUEUE", "NPU_SIM_TASK_DELAY_US"):
        env.pop(k, None)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def run_py(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 90) -> subprocess.CompletedProcess:
    """Runs ``code`` (dedented) in a fresh interpreter; returns the finished process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_subprocess_env(env),
        cwd=PKG_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_py_ok(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 90) -> str:
    """As run_py, asserting exit status 0; returns stdout."""
    p = run_py(code, env, timeout)
    assert p.returncode == 0, f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p.stdout


@pytest.fixture(name="run_py")
def _run_py_fixture():
    return run_py


def _loaded_npurt_path() -> str:
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("libnpurt.so"):
                return line.split()[-1]
    raise RuntimeError("libnpurt.so is not loaded in this process")


_NPURT = None


def load_npurt() -> ctypes.CDLL:
    global _NPURT
    if _NPURT is None:
        lib = ctypes.CDLL(_loaded_npurt_path())
        lib.npuLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.npuLaunchHostFunc.restype = ctypes.c_int
        lib.npuStreamSetTaskDelay.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.npuStreamSetTaskDelay.restype = ctypes.c_int
        lib.npuGetLastErrorMessage.restype = ctypes.c_char_p
        _NPURT = lib
    return _NPURT


@pytest.fixture
def npurt() -> ctypes.CDLL:
    return load_npurt()


_HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class StreamGate:
    """Blocks ``stream`` (its work queued after this point) until ``release()``.

    ``started`` is set once the blocking task occupies the stream (only known
    for the ctypes fallback; the _C helper is synchronous enough by design).
    """

    def __init__(self, stream: torch.Stream) -> None:
        self.stream = stream
        self.released = False
        block = getattr(torch_npu._C, "_testing_block_stream", None)
        if block is not None:
            self._handle = block(stream.stream_id, stream.device_index, stream.device_type)
            self._event = None
            return
        self._handle = None
        self._event = threading.Event()
        self.started = threading.Event()
        ev, started = self._event, self.started

        def _wait(_: int) -> None:
            started.set()
            ev.wait()

        self._cb = _HOSTFN(_wait)  # kept alive as long as the gate
        raw = torch_npu.npu.Stream(
            stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type
        ).npu_stream  # drains the task queue: the gate is ordered after queued work
        status = load_npurt().npuLaunchHostFunc(raw, ctypes.cast(self._cb, ctypes.c_void_p), None)
        assert status == 0, f"npuLaunchHostFunc failed with status {status}"

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        if self._handle is not None:
            torch_npu._C._testing_release(self._handle)
        else:
            self._event.set()

    def __enter__(self) -> "StreamGate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.fixture
def gate():
    """Factory of StreamGates; every gate is released at teardown (no hang on failure)."""
    gates = []

    def make(stream: torch.Stream) -> StreamGate:
        g = StreamGate(stream)
        gates.append(g)
        return g

    yield make
    for g in gates:
        g.release()


def read_f32(t: torch.Tensor, i: int = 0) -> float:
    """Reads element i of a contiguous float32 npu tensor straight from device
    memory (host memory in the simulator), without synchronizing anything."""
    assert t.dtype == torch.float32 and t.is_contiguous()
    return ctypes.c_float.from_address(t.data_ptr() + 4 * i).value


def device_works(device: int = 0) -> None:
    """Asserts that a fresh computation on ``device`` gives the right result."""
    x = torch.arange(6, dtype=torch.float32, device=f"npu:{device}")
    assert (x * 2 + 1).sum().item() == 36.0


def racecheck_on() -> bool:
    """True if this process runs with npurt's race detector on."""
    return os.environ.get("NPU_SIM_RACECHECK", "0") not in ("", "0", "off")


def race_reports() -> int:
    """Races npurt reported so far in this process."""
    lib = load_npurt()
    n = ctypes.c_uint64()
    assert lib.npuRaceCheckGetReportCount(ctypes.byref(n)) == 0
    return n.value


def last_race_report() -> str:
    buf = ctypes.create_string_buffer(4096)
    assert load_npurt().npuRaceCheckGetLastReport(buf, ctypes.c_size_t(len(buf))) == 0
    return buf.value.decode(errors="replace")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if not racecheck_on():
        return
    for item in items:
        marker = item.get_closest_marker("racy")
        if marker is not None:
            reason = marker.kwargs.get("reason", "races on purpose")
            item.add_marker(pytest.mark.skip(reason=f"races on purpose ({reason}): NPU_SIM_RACECHECK is on"))


@pytest.fixture(autouse=True)
def _clean_device_state():
    """Each test starts on device 0 with default streams current, and must leave
    the devices working (pending task failures surface here)."""
    reports_before = race_reports() if racecheck_on() else 0
    torch_npu.npu.set_device(0)
    for d in range(torch_npu.npu.device_count()):
        torch_npu.npu.set_stream(torch_npu.npu.default_stream(d))
    torch_npu.npu.set_device(0)
    yield
    torch_npu.npu.set_device(0)
    for d in range(torch_npu.npu.device_count()):
        torch_npu.npu.set_stream(torch_npu.npu.default_stream(d))
    torch_npu.npu.set_device(0)
    for d in range(torch_npu.npu.device_count()):
        torch_npu.npu.synchronize(d)
    device_works(0)
    if racecheck_on() and race_reports() != reports_before:
        pytest.fail(f"npurt reported {race_reports() - reports_before} race(s); the last: {last_race_report()}")


try:  # pytest-timeout (requirements-dev.txt) enforces `timeout` from pytest.ini
    import pytest_timeout  # noqa: F401

    _HAVE_PYTEST_TIMEOUT = True
except ImportError:  # fallback: a hung test dumps all stacks and ends the run
    _HAVE_PYTEST_TIMEOUT = False


@pytest.fixture(autouse=True)
def _fallback_timeout():
    if _HAVE_PYTEST_TIMEOUT:
        yield
        return
    import faulthandler

    faulthandler.dump_traceback_later(180, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
