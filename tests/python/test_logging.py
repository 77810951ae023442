"""torch_npu's logging: ``torch_npu._logging``, ``torch_npu._C._logging`` and
``torch_npu.utils.patch_getenv``.

In-process tests set the levels through ``torch._logging.set_logs`` (which
torch_npu patches to reach the C++ loggers) and read the C++ loggers' lines
from file descriptor 2 (pytest's ``capfd``); each puts the settings back.
Environment variables (TORCH_NPU_LOGS, TORCH_LOGS, TORCH_NPU_LOGS_FILTER,
RANK) are read once per process, so those cases run in subprocesses, several
checks per subprocess.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterator

import pytest
import torch
import torch_npu

from conftest import run_py

# torch_npu's line format: level letter, MMDD, time with microseconds, pid,
# file:line, "] ", then the message.
LINE = re.compile(r"^([VIWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ (\S+):(\d+)\] (.*)$")


def npu_lines(text: str) -> list[str]:
    """The messages of the C++ log lines in ``text`` (prefix removed)."""
    return [m.group(4) for m in map(LINE.match, text.splitlines()) if m and "csrc/" in m.group(2)]


@contextlib.contextmanager
def logs(**modules: int) -> Iterator[None]:
    """torch._logging.set_logs(modules=...) for the block, then everything off."""
    torch._logging.set_logs(modules=modules)
    try:
        yield
    finally:
        torch._logging.set_logs()


def test_c_children_exist_after_import():
    assert hasattr(torch_npu._C, "_logging")
    assert hasattr(torch_npu._C, "_flops_count")
    assert torch_npu._C._logging._LogContext.GetInstance() is not None


def test_torch_npu_log_names_are_registered():
    aliases = torch._logging._internal.log_registry.log_alias_to_log_qnames
    expected = {
        "memory": "torch_npu.memory",
        "dispatch": "torch_npu.dispatch",
        "dispatch_time": "torch_npu.dispatch.time",
        "env": "torch_npu.env",
        "acl": "torch_npu.acl",
        "npugraph": "torch_npu.npugraph",
        "aclgraph": "torch_npu.npugraph",
    }
    for alias, qname in expected.items():
        assert aliases[alias] == [qname], alias


def test_logging_is_off_by_default(capfd):
    x = torch.ones(16, device="npu")
    y = (x + 1).nonzero()
    del y
    torch.npu.empty_cache()
    torch.npu.synchronize()
    assert npu_lines(capfd.readouterr().err) == []


def test_set_logs_reaches_the_memory_logger(capfd):
    with logs(memory=logging.DEBUG):
        x = torch.empty(1000, device="npu")
        del x
        torch.npu.empty_cache()
    y = torch.empty(1000, device="npu")  # after set_logs(): off again
    del y
    lines = npu_lines(capfd.readouterr().err)
    mallocs = [ln for ln in lines if ln.startswith("PTA CachingAllocator malloc: malloc = 4096,")]
    frees = [ln for ln in lines if ln.startswith("PTA CachingAllocator free: free = 4096,")]
    assert len(mallocs) == 1 and len(frees) == 1, lines
    assert "emptyCache success." in lines
    assert re.search(r"cached = \d+, allocated = \d+$", mallocs[0])


def test_info_level_leaves_out_debug_lines(capfd):
    with logs(memory=logging.INFO):
        x = torch.empty(1000, device="npu")
        del x
        torch.npu.empty_cache()
    lines = npu_lines(capfd.readouterr().err)
    assert "emptyCache success." in lines
    assert not any("malloc" in ln for ln in lines), lines


def test_out_of_memory_is_logged_at_info(capfd):
    total = torch.npu.mem_get_info()[1]
    with logs(memory=logging.INFO):
        with pytest.raises(torch.npu.OutOfMemoryError) as raised:
            torch.empty(total + (1 << 20), dtype=torch.uint8, device="npu")
    lines = npu_lines(capfd.readouterr().err)
    oom = [ln for ln in lines if "out of memory" in ln.lower()]
    assert len(oom) == 1, lines
    assert oom[0].split(".")[0] in str(raised.value)


def test_dispatch_logs_name_the_op_and_its_path(capfd):
    x = torch.arange(8.0, device="npu")
    with logs(dispatch=logging.DEBUG):
        y = x.mul(2)
        z = y.nonzero()  # data-dependent shape: the synchronous path
    del z
    lines = npu_lines(capfd.readouterr().err)
    assert any(re.fullmatch(r"Op aten::mul: asynchronous path, queued on stream \d+ of npu:0", ln)
               for ln in lines), lines
    assert any(re.fullmatch(r"Op aten::nonzero: synchronous path, the host waited for stream \d+ of npu:0", ln)
               for ln in lines), lines
    # dispatch_time is torch_npu.dispatch.time: a child of dispatch, so on too.
    assert any(re.fullmatch(r"Op aten::mul: enQueue duration is \(ns\): \d+", ln) for ln in lines), lines


def test_dispatch_time_alone_leaves_dispatch_off(capfd):
    x = torch.arange(8.0, device="npu")
    with logs(dispatch_time=logging.INFO):
        x.mul(2)
    lines = npu_lines(capfd.readouterr().err)
    assert any(ln.startswith("Op aten::mul: enQueue duration is (ns): ") for ln in lines), lines
    assert not any("asynchronous path" in ln for ln in lines), lines


def test_dispatch_logs_cover_kernels_of_their_own(capfd):
    conv = torch.nn.Conv2d(2, 3, 3).npu()
    inp = torch.randn(1, 2, 5, 5, device="npu", requires_grad=True)
    a = torch.randn(4, 4, device="npu", dtype=torch.half)
    with logs(dispatch=logging.DEBUG):
        conv(inp).sum().backward()
        a @ a  # the half product's own kernel (HalfMatmul.cpp)
    lines = npu_lines(capfd.readouterr().err)
    for name in ("aten::convolution_overrideable", "aten::convolution_backward_overrideable", "aten::mm"):
        assert any(ln.startswith(f"Op {name}: asynchronous path") for ln in lines), (name, lines)


@pytest.mark.parametrize("alias", ["npugraph", "aclgraph"])
def test_graph_capture_and_replay_are_logged(capfd, alias):
    x = torch.ones(4, device="npu")
    s = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    with logs(**{alias: logging.DEBUG}):
        with torch.npu.stream(s):
            g.capture_begin()
            y = x * 2
            g.capture_end()
        g.replay()
        torch.npu.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 2.0))
    lines = npu_lines(capfd.readouterr().err)
    assert lines[:2] == ["NPUGRAPH Capture begin", lines[1]] and lines[1].startswith("NPUGRAPH Capture begin done:")
    assert "NPUGRAPH Capture end" in lines
    assert any(re.fullmatch(r"NPUGRAPH Capture end done: nodes=\d+, has_graph_exec=1", ln) for ln in lines)
    assert any(ln.startswith("NPUGRAPH Replay device=0") for ln in lines), lines


def test_set_logs_all_turns_every_npu_logger_on(capfd):
    torch._logging.set_logs(all=logging.DEBUG)
    try:
        x = torch.empty(10, device="npu")
        x.mul_(2)
    finally:
        torch._logging.set_logs()
    lines = npu_lines(capfd.readouterr().err)
    assert any(ln.startswith("PTA CachingAllocator malloc") for ln in lines), lines
    assert any(ln.startswith("Op aten::mul_: asynchronous path") for ln in lines), lines


def test_bad_levels_are_refused_and_change_nothing(capfd):
    ctx = torch_npu._C._logging._LogContext.GetInstance()
    with pytest.raises(ValueError, match=r"Expected a logging level from 0 \(NOTSET\) to 50 \(CRITICAL\) "
                                         r"for 'torch_npu.memory', but got 99"):
        ctx.setLogs({"torch_npu.dispatch": 10, "torch_npu.memory": 99})
    with pytest.raises(ValueError, match="but got -1"):
        ctx.setLogs({"torch_npu.memory": -1})
    with pytest.raises(TypeError):
        ctx.setLogs({"torch_npu.memory": "DEBUG"})
    with pytest.raises(ValueError, match="Unrecognized log level"):  # torch's own check
        torch._logging.set_logs(modules={"memory": 3})
    x = torch.empty(10, device="npu")
    x.add_(1)
    assert npu_lines(capfd.readouterr().err) == []


def test_patch_getenv_logs_each_variable_once(monkeypatch, caplog):
    from torch_npu.utils import patch_getenv

    assert torch_npu.utils.patch_getenv is patch_getenv
    monkeypatch.setenv("TORCH_NPU_TEST_GETENV_ONCE", "yes")
    monkeypatch.setenv("TORCH_NPU_TEST_GETENV_EMPTY", "")
    patch_getenv._seen.discard("TORCH_NPU_TEST_GETENV_ONCE")
    with caplog.at_level(logging.INFO, logger="torch_npu.env"):
        import os

        assert os.getenv("TORCH_NPU_TEST_GETENV_ONCE") == "yes"
        assert os.environ.get("TORCH_NPU_TEST_GETENV_ONCE") == "yes"
        assert os.getenv("TORCH_NPU_TEST_GETENV_EMPTY") == ""
        assert os.getenv("TORCH_NPU_TEST_GETENV_UNSET", "dflt") == "dflt"
        assert os.environ.get("TORCH_NPU_TEST_GETENV_UNSET") is None
    messages = [r.getMessage() for r in caplog.records if r.name == "torch_npu.env"]
    assert messages == ["get env TORCH_NPU_TEST_GETENV_ONCE = yes"]


def _stderr_of(code: str, env: dict[str, str]) -> str:
    p = run_py(code, env)
    assert p.returncode == 0, f"exit status {p.returncode}\nstderr:\n{p.stderr}"
    assert "done" in p.stdout
    return p.stderr


WORKLOAD = """
import os, logging
import torch, torch_npu
x = torch.ones(1000, device="npu")
y = x.mul(2)
s = (x @ x.view(1000, 1)).sum()
x.add_(1).nonzero()
os.getenv("FOO_TEST"); os.environ.get("FOO_TEST")
print("done")
"""


@pytest.mark.subprocess
def test_torch_npu_logs_rank_and_env_in_one_process():
    # TORCH_NPU_LOGS with TORCH_LOGS' syntax, RANK in the prefix, the env
    # logger (each variable once), and set_logs ignored while the variable is
    # set (torch's rule, with torch's warning).
    err = _stderr_of(
        WORKLOAD + """
torch._logging.set_logs(modules={"memory": logging.WARNING})
torch.empty(1000, device="npu")
print("done")
""",
        {"TORCH_NPU_LOGS": "+memory,+dispatch,env", "RANK": "3", "FOO_TEST": "bar"},
    )
    lines = err.splitlines()
    npu = [ln for ln in lines if LINE.match(ln) and "csrc/" in LINE.match(ln).group(2)]
    assert npu and all(LINE.match(ln).group(4).startswith("[rank:3] ") for ln in npu), err
    messages = [LINE.match(ln).group(4)[len("[rank:3] "):] for ln in npu]
    assert any(m.startswith("PTA CachingAllocator malloc: malloc = 4096,") for m in messages), err
    assert any(m.startswith("Op aten::mul: asynchronous path") for m in messages), err
    assert any(m.startswith("Op aten::nonzero: synchronous path") for m in messages), err
    assert sum("get env FOO_TEST = bar" in ln for ln in lines) == 1, err
    assert "ignoring call to set_logs" in err
    # The later allocation is still logged: set_logs did not apply.
    assert sum(m.startswith("PTA CachingAllocator malloc: malloc = 4096,") for m in messages) >= 2, err


@pytest.mark.subprocess
def test_logs_filter_keeps_and_drops_by_keyword():
    err = _stderr_of(WORKLOAD, {"TORCH_NPU_LOGS": "+dispatch", "TORCH_NPU_LOGS_FILTER": " +aten::m , -aten::mm,x"})
    messages = npu_lines(err)
    assert any(m.startswith("Op aten::mul: ") for m in messages), err
    assert not any("aten::mm" in m for m in messages), err  # dropped by -aten::mm
    assert not any("aten::add_" in m or "aten::nonzero" in m for m in messages), err  # not kept by +aten::m


@pytest.mark.subprocess
def test_torch_logs_all_turns_the_npu_loggers_on():
    # TORCH_LOGS is parsed by `import torch`, before torch_npu's names exist;
    # "+all" sets "torch", the level of every logger without one of its own.
    err = _stderr_of(WORKLOAD, {"TORCH_LOGS": "+all"})
    messages = npu_lines(err)
    assert any(m.startswith("PTA CachingAllocator malloc") for m in messages), err
    assert any(m.startswith("Op aten::mul: asynchronous path") for m in messages), err


@pytest.mark.subprocess
def test_nothing_is_logged_without_settings():
    err = _stderr_of(WORKLOAD, {"FOO_TEST": "bar"})
    assert npu_lines(err) == [] and "get env" not in err, err


@pytest.mark.parametrize(
    "setting, message",
    [
        ("+memory,op_plugin", r"TORCH_NPU_LOGS='\+memory,op_plugin' names 'op_plugin', torch_npu's log of "
                              r"op-plugin's aclnn kernels.*which this backend does not have\. Remove it"),
        ("+memory,bogus", r"Invalid log settings: \+memory,bogus"),  # torch's own check
    ],
)
def test_bad_torch_npu_logs_fail_the_import_with_a_clear_error(setting, message):
    p = run_py("import torch, torch_npu", {"TORCH_NPU_LOGS": setting})
    assert p.returncode != 0
    assert re.search(message, p.stderr), p.stderr
    assert "ValueError" in p.stderr
