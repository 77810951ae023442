"""Device functions of ``torch.npu``: device_count, current_device,
set_device, device (context manager), device_of, synchronize(device=None),
is_available, get_device_name, get_device_properties, the per-thread
current device, and the validation of the configuration (environment
variables) at the first initialisation."""

import threading

import pytest
import torch

from conftest import NPU_DEVICE_TYPE, run_py_ok


def test_count_and_availability():
    assert torch.npu.device_count() == 2
    assert torch.npu.is_available()
    assert torch.npu.is_initialized() in (True, False)


def test_set_and_current_device():
    assert torch.npu.current_device() == 0
    torch.npu.set_device(1)
    assert torch.npu.current_device() == 1
    assert torch.empty(1, device="npu").device == torch.device("npu:1")
    assert torch.npu.current_stream().device_index == 1
    torch.npu.set_device("npu:0")
    assert torch.npu.current_device() == 0
    torch.npu.set_device(torch.device("npu", 1))
    assert torch.npu.current_device() == 1
    torch.npu.set_device(0)


def test_device_context_manager():
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
        with torch.npu.device("npu:0"):
            assert torch.npu.current_device() == 0
        assert torch.npu.current_device() == 1
    assert torch.npu.current_device() == 0
    with torch.npu.device(None):
        assert torch.npu.current_device() == 0
    with torch.npu.device(-1):
        assert torch.npu.current_device() == 0


def test_device_context_restores_on_exception():
    with pytest.raises(KeyError):
        with torch.npu.device(1):
            raise KeyError("boom")
    assert torch.npu.current_device() == 0


def test_device_of():
    t1 = torch.ones(1, device="npu:1")
    with torch.npu.device_of(t1):
        assert torch.npu.current_device() == 1
    assert torch.npu.current_device() == 0
    with torch.npu.device_of(torch.ones(1)):  # cpu tensor: no-op
        assert torch.npu.current_device() == 0


def test_synchronize_variants(gate):
    x = torch.zeros(8, device="npu:1")
    torch.npu.synchronize(1)
    g = gate(torch.npu.current_stream(1))
    x.add_(1)
    torch.npu.synchronize(0)  # other device: does not wait for device 1
    torch.npu.synchronize()  # current device (0): neither
    g.release()
    torch.npu.synchronize("npu:1")
    assert torch.npu.current_stream(1).query()
    torch.npu.synchronize(torch.device("npu:1"))
    torch.npu.synchronize(None)
    assert x.sum().item() == 8


def test_synchronize_device_waits_for_every_stream(gate):
    streams = [torch.npu.Stream() for _ in range(3)]
    xs = []
    gates = [gate(s) for s in streams]
    for s in streams:
        with torch.npu.stream(s):
            xs.append(torch.ones(4, device="npu") * 2)
    for g in gates:
        g.release()
    torch.npu.synchronize()
    assert all(s.query() for s in streams)
    assert all(x.sum().item() == 8 for x in xs)


def test_device_name_and_properties():
    assert torch.npu.get_device_name() == "NPU-SIM-0"
    assert torch.npu.get_device_name(1) == "NPU-SIM-1"
    assert torch.npu.get_device_name("npu:1") == "NPU-SIM-1"
    p = torch.npu.get_device_properties(0)
    assert p.name == "NPU-SIM-0"
    assert p.total_memory == 8192 * 1024 * 1024
    assert p.multi_processor_count == 2
    assert torch.npu.get_device_properties(torch.device("npu:1")).name == "NPU-SIM-1"


def test_current_device_is_per_thread():
    torch.npu.set_device(1)
    seen = []

    def worker():
        seen.append(torch.npu.current_device())
        torch.npu.set_device(0)
        seen.append(torch.npu.current_device())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [0, 0]
    assert torch.npu.current_device() == 1
    torch.npu.set_device(0)


def test_streams_functions_take_devices():
    assert torch.npu.default_stream(1).device_index == 1
    assert torch.npu.current_stream("npu:1").device == torch.device("npu:1")
    assert torch.npu.default_stream(torch.device("npu:0")).stream_id == 0
    assert torch.npu.current_stream().device_type == NPU_DEVICE_TYPE
    s = torch.npu.Stream(device=1)
    with torch.npu.stream(s):
        assert torch.npu.current_device() == 1
        assert torch.npu.current_stream() == s
    assert torch.npu.current_device() == 0


# --------------------------------------------------------------------------
# Configuration: every variable is validated at the first initialisation
# --------------------------------------------------------------------------

# Each first use of the device must raise the configuration error (not the
# launch, external-stream check or pool creation that needs the variable,
# which may come much later), and raise it again at the next use.
BAD_CONFIG_PROBE = """
import torch, torch_npu
npu = torch_npu.npu
uses = [
    ("current_device", lambda: npu.current_device()),
    ("is_initialized", None),
    ("empty", lambda: torch.empty(2, device="npu")),
    ("Stream", lambda: npu.Stream()),
    ("Event.record", lambda: npu.Event().record()),
    ("set_stream", lambda: npu.set_stream(npu.default_stream())),
    ("synchronize", lambda: npu.synchronize()),
]
for name, use in uses:
    if use is None:
        print(name, npu.is_initialized())
        continue
    try:
        use()
        print(name, "NO ERROR")
    except RuntimeError as e:
        print(name, str(e).splitlines()[0])
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("var,value,accepted", [
    ("TASK_QUEUE_ENABLE", "bogus", "TASK_QUEUE_ENABLE should be 0, 1 or 2, got 'bogus'"),
    ("ASCEND_LAUNCH_BLOCKING", "yes", "ASCEND_LAUNCH_BLOCKING should be 0 or 1, got ASCEND_LAUNCH_BLOCKING='yes'"),
    ("PER_STREAM_QUEUE", "2", "PER_STREAM_QUEUE should be 0 or 1, got PER_STREAM_QUEUE='2'"),
    ("TORCH_NPU_EXTERNAL_STREAM_MODE", "bogus", "TORCH_NPU_EXTERNAL_STREAM_MODE should be 'compat' or 'full', got 'bogus'"),
    ("NPU_SIM_DEVICE_COUNT", "0", "NPU_SIM_DEVICE_COUNT must be an integer in [1, 32], got '0'"),
    ("NPU_SIM_CORES", "two", "NPU_SIM_CORES must be an integer in [1, 256], got 'two'"),
    ("NPU_SIM_MEMORY_MB", "-1", "NPU_SIM_MEMORY_MB must be an integer in [1, 16777216], got '-1'"),
    ("NPU_SIM_TASK_DELAY_US", "1e3", "NPU_SIM_TASK_DELAY_US must be an integer in [0, 10000000], got '1e3'"),
    ("NPU_CPP_META", "yes", "NPU_CPP_META should be 0 or 1, but got 'yes'"),
], ids=lambda x: None)
def test_bad_variable_raises_at_initialisation(var, value, accepted):
    out = run_py_ok(BAD_CONFIG_PROBE, env={var: value})
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines.pop("is_initialized") == "False", out
    assert len(lines) == 6, out
    for name, message in lines.items():
        assert accepted in message, f"{name}: {message}\n{out}"
    if var.startswith("NPU_SIM_"):  # the runtime's status, said in words
        assert lines["current_device"].startswith("NPU initialisation failed: "), out
        assert "npuErrorInitializationError" in lines["current_device"], out


@pytest.mark.subprocess
def test_bad_streams_per_device_warns_at_initialisation_and_uses_32():
    out = run_py_ok(
        """
        import warnings, torch, torch_npu
        npu = torch_npu.npu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            npu.current_device()
        print(len(caught), str(caught[0].message).splitlines()[0] if caught else "-")
        print(npu.is_initialized())
        T = npu.default_stream().device_type
        print(npu.Stream(stream_id=96 + 31, device_index=0, device_type=T).stream_id)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            npu.Stream(), torch.ones(2, device="npu").sum().item()
        print(len(caught))
        """,
        env={"STREAMS_PER_DEVICE": "7"},
    )
    lines = out.splitlines()
    assert lines[0].startswith("1 STREAMS_PER_DEVICE should be 8 or 32, got '7'; using 32."), out
    assert lines[1:] == ["True", "127", "0"], out
