"""torch_npu.npu's process-wide settings (npu_config.py): set_device_limit /
get_device_limit, set_op_timeout_ms, use_compatible_impl, and device_count
before initialisation (ASCEND_RT_VISIBLE_DEVICES)."""

import pytest
import torch
import torch_npu

from conftest import load_npurt, run_py_ok

BAD_DEVICES = ["0", 0.0, None, True, False]


# ---------------------------------------------------------------- device limits


@pytest.mark.parametrize("device", BAD_DEVICES)
def test_device_limit_rejects_non_int_devices(device):
    with pytest.raises(TypeError, match="device must be an int, but got"):
        torch_npu.npu.get_device_limit(device)
    with pytest.raises(TypeError, match="device must be an int, but got"):
        torch_npu.npu.set_device_limit(device)
    assert not torch_npu.npu.set_device_limit.called  # a rejected call does not use up the one call


@pytest.mark.parametrize("device", [-1, 2, 99])
def test_device_limit_rejects_devices_out_of_range(device):
    with pytest.raises(AssertionError, match=rf"Invalid device id: expected an int in \[0, 2\), but got {device}"):
        torch_npu.npu.get_device_limit(device)
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch_npu.npu.set_device_limit(device, 1, 1)
    assert not torch_npu.npu.set_device_limit.called


def test_device_limit_rejects_bad_core_numbers():
    cores = torch.npu.get_device_properties(0).multi_processor_count
    with pytest.raises(TypeError, match="cube_num should be an int, could not be float"):
        torch_npu.npu.set_device_limit(0, 1.0)
    with pytest.raises(RuntimeError, match=rf"Expected a core number in \[1, {cores}\].*but got 0"):
        torch_npu.npu.set_device_limit(0, 0)
    with pytest.raises(RuntimeError, match=rf"but got {cores + 1}"):
        torch_npu.npu.set_device_limit(0, -1, cores + 1)
    assert not torch_npu.npu.set_device_limit.called


def test_unset_device_limit_reports_the_core_count():
    cores = torch.npu.get_device_properties(1).multi_processor_count
    assert torch_npu.npu.get_device_limit(1) == {"cube_core_num": cores, "vector_core_num": cores}


def test_device_limit_is_every_streams_default_and_is_set_once():
    # Once per process, and it caps every stream of the device: a fresh one.
    out = run_py_ok(
        """
        import torch, torch_npu
        npu = torch_npu.npu
        s, own = npu.Stream(device=0), npu.Stream(device=0)
        npu.set_stream_limit(own, 2)
        assert torch_npu._C._npu_streamIntraOpThreads(s) == 0      # no limit yet
        npu.set_device_limit(0, 1)
        try:
            npu.set_device_limit(0, 1)
        except RuntimeError as e:
            print("again:", e)
        print(npu.get_device_limit(0), npu.get_device_limit(1))
        print(npu.get_stream_limit(s), npu.get_stream_limit(own))
        # The device's cube limit caps kernels of its streams; a stream's own value wins.
        print(torch_npu._C._npu_streamIntraOpThreads(s), torch_npu._C._npu_streamIntraOpThreads(own))
        print(torch_npu._C._npu_streamIntraOpThreads(npu.Stream(device=1)))
        with npu.stream(s):
            x = torch.arange(6.0, device="npu:0").reshape(2, 3)
            print((x @ x.t()).sum().item())
        """,
        env={"NPU_SIM_CORES": "2"},
    )
    lines = out.splitlines()
    assert lines[0] == "again: Function 'set_device_limit' has already been called, You can only set this interface once."
    assert lines[1] == "{'cube_core_num': 1, 'vector_core_num': 2} {'cube_core_num': 2, 'vector_core_num': 2}"
    assert lines[2] == "{'cube_core_num': 1, 'vector_core_num': 2} {'cube_core_num': 2, 'vector_core_num': 2}"
    assert lines[3:] == ["1 2", "0", "83.0"]


# -------------------------------------------------------------- op timeout


def test_set_op_timeout_ms_rejects_bad_values():
    with pytest.raises(OverflowError, match=r"can't convert negative value to unsigned int.*got -1"):
        torch_npu.npu.set_op_timeout_ms(-1)
    with pytest.raises(ValueError, match=r"Overflow when unpacking.*got 4294967296"):
        torch_npu.npu.set_op_timeout_ms(2**32)
    for bad in (1.5, "10", None, True):
        with pytest.raises(TypeError, match="timeout must be an int"):
            torch_npu.npu.set_op_timeout_ms(bad)
    assert torch_npu.npu.get_op_timeout_ms() == 0


def test_op_running_longer_than_the_timeout_fails_its_stream(npurt):
    x = torch.ones(4, device="npu")
    slow = torch_npu.npu.Stream()
    # Every work task of `slow` takes at least 300 ms on the device: longer
    # than the 100 ms timeout by construction, not by chance.
    assert npurt.npuStreamSetTaskDelay(slow.npu_stream, 300_000) == 0
    torch.npu.synchronize()
    try:
        torch_npu.npu.set_op_timeout_ms(100)
        assert torch_npu.npu.get_op_timeout_ms() == 100
        with torch.npu.stream(slow):
            y = x + 1
            z = y * 2  # queued behind the timed-out op: discarded
        with pytest.raises(RuntimeError, match=r"task 'aten::add.*op execution timed out: the task ran for \d+ us, "
                                               r"longer than the op execution timeout of 100000 us"):
            slow.synchronize()
        slow.synchronize()  # reported once
        with pytest.raises(RuntimeError, match="op execution timed out"):
            z.cpu()  # poisoned: its op did not run
    finally:
        torch_npu.npu.set_op_timeout_ms(0)
        assert npurt.npuStreamSetTaskDelay(slow.npu_stream, -1) == 0
    with torch.npu.stream(slow):
        assert (x + 1).sum().item() == 8.0  # the stream works again


def test_op_timeout_zero_means_none(npurt):
    slow = torch_npu.npu.Stream()
    assert npurt.npuStreamSetTaskDelay(slow.npu_stream, 20_000) == 0
    try:
        torch_npu.npu.set_op_timeout_ms(0)
        with torch.npu.stream(slow):
            assert (torch.ones(3, device="npu") * 2).sum().item() == 6.0
    finally:
        assert npurt.npuStreamSetTaskDelay(slow.npu_stream, -1) == 0


# ------------------------------------------------------ compatible implementations


def test_use_compatible_impl_round_trips():
    old = torch_npu.npu.are_compatible_impl_enabled()
    try:
        torch_npu.npu.use_compatible_impl(True)
        assert torch_npu.npu.are_compatible_impl_enabled() is True
        torch_npu.npu.use_compatible_impl(False)
        assert torch_npu.npu.are_compatible_impl_enabled() is False
        with pytest.raises(TypeError, match="is_enable must be a bool, but got str"):
            torch_npu.npu.use_compatible_impl("1")
    finally:
        torch_npu.npu.use_compatible_impl(old)


def test_compatible_impl_environment_variable(monkeypatch):
    from torch_npu.npu import npu_config

    for value, enabled in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("TORCH_NPU_USE_COMPATIBLE_IMPL", value)
        assert npu_config._compatible_impl_from_env() is enabled
    monkeypatch.setenv("TORCH_NPU_USE_COMPATIBLE_IMPL", "yes")
    with pytest.raises(ValueError, match="TORCH_NPU_USE_COMPATIBLE_IMPL must be 0 or 1, but got 'yes'"):
        npu_config._compatible_impl_from_env()


# ------------------------------------------------- device count before init


def test_device_count_rereads_visible_devices_until_initialisation():
    # One interpreter for two variables read at start-up (to spare CI a process).
    out = run_py_ok(
        """
        import os, torch, torch_npu
        print(torch_npu.npu.are_compatible_impl_enabled())  # TORCH_NPU_USE_COMPATIBLE_IMPL=1
        counts = [torch.npu.device_count()]
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "1"
        counts.append(torch.npu.device_count())
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,7"   # invalid: 0 devices, not a crash
        counts.append(torch.npu.device_count())
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "1"
        torch.empty(1, device="npu")                       # initialises: frozen from here on
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
        counts += [torch.npu.device_count(), torch_npu._C._npu_getDeviceCount()]
        print(counts, torch.npu.get_device_name(0))
        """,
        env={"NPU_SIM_DEVICE_COUNT": "2", "TORCH_NPU_USE_COMPATIBLE_IMPL": "1"},
    )
    assert out.splitlines() == ["True", "[2, 1, 0, 1, 1] NPU-SIM-1"]


def test_device_context_objects_name_their_device():
    # torch.cuda accepts torch.cuda.device objects wherever it takes a device.
    x = torch.ones(256, device="npu:1")
    assert torch.npu.memory_allocated(torch.npu.device(1)) == torch.npu.memory_allocated(1) > 0
    assert torch.npu.get_device_name(torch.npu.device(1)) == "NPU-SIM-1"
    del x
    with pytest.raises(TypeError, match="Expected a torch.device, str, int or None, but got float"):
        torch.npu.memory_allocated(1.0)
