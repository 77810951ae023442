"""Device functions of ``torch.npu``: device_count, current_device,
set_device, device (context manager), device_of, synchronize(device=None),
is_available, get_device_name, get_device_properties, and the per-thread
current device."""

import threading

import pytest
import torch

from conftest import NPU_DEVICE_TYPE


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
