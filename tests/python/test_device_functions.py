"""Device and runtime functions torch_npu has beyond torch.cuda's core set:
init, _get_device_index, get_device_capability, can_device_access_peer,
current_blas_handle, _set/_get_rng_state_offset, _sleep and the raw current
stream handles of torch_npu._C."""

import time
import warnings

import pytest
import torch
import torch_npu


def test_init_is_idempotent():
    torch.npu.init()
    torch.npu.init()
    assert torch.npu.is_initialized()


def test_get_device_index():
    f = torch.npu._get_device_index
    assert f(1) == 1
    assert f("npu:1") == 1
    assert f(torch.device("npu", 0)) == 0
    assert f(None, optional=True) == torch.npu.current_device()
    assert f("cpu", allow_cpu=True) == -1
    with pytest.raises(ValueError, match="Expected a npu device, but got: cpu"):
        f("cpu")
    with pytest.raises(ValueError, match="Expected a npu or cpu device, but got: meta"):
        f("meta", allow_cpu=True)


def test_get_device_capability(monkeypatch):
    monkeypatch.delenv("TORCH_NPU_DEVICE_CAPABILITY", raising=False)
    with pytest.warns(UserWarning, match="TORCH_NPU_DEVICE_CAPABILITY"):
        assert torch.npu.get_device_capability() is None
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "8.0")
    with pytest.warns(UserWarning, match="only for compatibility"):
        assert torch.npu.get_device_capability(0) == (8, 0)
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "eight")
    with pytest.warns(UserWarning, match="can't parse .*: eight"):
        assert torch.npu.get_device_capability() is None


def test_can_device_access_peer():
    assert torch.npu.can_device_access_peer(0, 1)
    assert torch.npu.can_device_access_peer("npu:1", torch.device("npu:0"))
    assert not torch.npu.can_device_access_peer(0, 0)
    with pytest.raises(AssertionError, match="Invalid device id: 7"):
        torch.npu.can_device_access_peer(7, 0)
    with pytest.raises(AssertionError, match="Invalid peer device id: 9"):
        torch.npu.can_device_access_peer(0, 9)


def test_current_blas_handle_warns():
    with pytest.warns(UserWarning, match="NPU does not use blas handle"):
        assert torch.npu.current_blas_handle() is None


def test_rng_state_offset():
    torch.npu.manual_seed(1)
    assert torch.npu._get_rng_state_offset() == 0
    a = torch.rand(4, device="npu").cpu()
    assert torch.npu._get_rng_state_offset() > 0
    torch.npu._set_rng_state_offset(0)
    assert torch.equal(torch.rand(4, device="npu").cpu(), a)
    torch.npu._set_rng_state_offset(8, device=1)
    assert torch.npu._get_rng_state_offset(1) == 8
    with pytest.raises(TypeError, match="float"):
        torch.npu._set_rng_state_offset(1.5)


def test_sleep_keeps_the_stream_busy_without_blocking_the_host():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        t0 = time.perf_counter()
        torch.npu._sleep(100_000_000)  # 100 ms
        assert time.perf_counter() - t0 < 0.05
        assert not s.query()
        x = torch.ones(2, device="npu") * 2  # queued behind the sleep
    s.synchronize()
    assert time.perf_counter() - t0 >= 0.09
    assert x.cpu().tolist() == [2.0, 2.0]


def test_sleep_bad_arguments():
    with pytest.raises(RuntimeError, match="non-negative number of cycles, but got -5"):
        torch.npu._sleep(-5)
    with pytest.raises(TypeError, match="str"):
        torch.npu._sleep("10")
    torch.npu._sleep(0)


def test_raw_current_stream():
    raw = torch_npu._C._npu_getCurrentRawStream(0)
    assert raw == torch_npu._C._npu_getCurrentRawStreamNoWait(0) == torch.npu.current_stream(0).npu_stream
    s = torch.npu.Stream(device=1)
    with torch.npu.stream(s):
        assert torch_npu._C._npu_getCurrentRawStream(1) == s.npu_stream != raw
    with pytest.raises(RuntimeError, match="9"):
        torch_npu._C._npu_getCurrentRawStream(9)


def test_data_assignment_moves_a_parameter_between_cpu_and_npu():
    # Note [Shallow copies between cpu and npu]
    p = torch.nn.Parameter(torch.arange(3.0))
    p.data = p.data.npu()
    assert p.device.type == "npu" and isinstance(p, torch.nn.Parameter)
    assert p.cpu().tolist() == [0.0, 1.0, 2.0]
    p.data = p.data.cpu()
    assert p.device.type == "cpu"
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        torch.randn(2).data = torch.randn(2).to_sparse()


def test_legacy_typed_tensors():
    t = torch.npu.FloatTensor(2, 3)
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device.type == "npu"
    assert torch.npu.FloatTensor(torch.Size([4])).shape == (4,)
    assert torch.npu.FloatTensor().shape == (0,)
    assert torch.npu.FloatTensor([10, 10]).cpu().tolist() == [10.0, 10.0]
    assert torch.npu.LongTensor(torch.ones(2)).dtype == torch.int64
    assert isinstance(torch.ones(2).npu(), torch.npu.FloatTensor)
    assert isinstance(torch.ones(2).double().npu(), torch.npu.DoubleTensor)
    assert isinstance(torch.ones(2, dtype=torch.int32, device="npu:1"), torch.npu.IntTensor)
    assert not isinstance(torch.ones(2).npu(), torch.npu.IntTensor)
    assert not isinstance(torch.ones(2), torch.npu.FloatTensor)
    assert torch_npu.npu.HalfTensor is torch.npu.HalfTensor
    assert torch.npu.FloatTensor(1, device=1).get_device() == 1
    with torch.npu.device(1):
        assert torch.npu.FloatTensor(1).get_device() == 1
        assert torch.npu.FloatTensor([1.0], device="npu:0").get_device() == 0
    with pytest.raises(RuntimeError, match="expects device type: npu but device type: cpu"):
        torch.npu.FloatTensor(2, device="cpu")
    with pytest.raises(RuntimeError, match="Invalid device_index: 7"):
        torch.npu.FloatTensor(2, device=7)
    with pytest.raises(TypeError, match="dtype"):
        torch.npu.FloatTensor(2, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"expects sizes.*\(2, 'x'\)"):
        torch.npu.FloatTensor(2, "x")


def test_legacy_typed_storages(tmp_path):
    s = torch.npu.IntStorage(4).fill_(7)
    assert s.device == torch.device("npu:0") and s.dtype == torch.int32 and s.size() == 4
    assert torch.is_storage(s) and isinstance(s, torch.npu.IntStorage)
    assert not isinstance(s, torch.npu.FloatStorage) and not isinstance(s, torch.IntStorage)
    assert not isinstance(torch.IntStorage(4), torch.npu.IntStorage)
    host = torch.randn(3).storage()
    assert isinstance(host.npu().double(), torch_npu.npu.DoubleStorage)
    assert isinstance(host.npu().float().cpu(), torch.FloatStorage)
    t = torch.zeros(4, dtype=torch.int32, device="npu")
    path = tmp_path / "s.pt"
    torch.save([t, t.storage()], path)
    t2, s2 = torch.load(path)
    t2.fill_(7)  # the storage was saved as the tensor's: they share it again after loading
    assert isinstance(s2, torch.storage.TypedStorage) and s2.tolist() == [7] * 4
    with torch.npu.device(1):
        assert torch.npu.HalfStorage(2).device == torch.device("npu:1")
    with pytest.raises(RuntimeError, match="from_buffer: Not available for NPU storage"):
        torch.npu.FloatStorage.from_buffer(b"\0" * 8)


_VISIBLE = """
import torch, torch_npu
print(torch.npu.device_count(), torch_npu._C._npu_getDeviceCount())
print(",".join(torch.npu.get_device_name(i) for i in range(torch.npu.device_count())))
x = torch.arange(3.0, device="npu:0")
print(x.cpu().tolist())
"""


@pytest.mark.parametrize(
    "value, names",
    [("1,0", "NPU-SIM-1,NPU-SIM-0"), (" 1 ", "NPU-SIM-1"), ("0, 1", "NPU-SIM-0,NPU-SIM-1"), ("", "NPU-SIM-0,NPU-SIM-1")],
)
def test_ascend_rt_visible_devices_restricts_and_reorders(value, names):
    # Note [Visible devices]
    from conftest import run_py_ok

    out = run_py_ok(_VISIBLE, {"ASCEND_RT_VISIBLE_DEVICES": value}).splitlines()
    count = len(names.split(","))
    assert out == [f"{count} {count}", names, "[0.0, 1.0, 2.0]"]


@pytest.mark.parametrize("value", ["0,0", "2", "npu0", ",", "0,", "-1", "1;0"])
def test_ascend_rt_visible_devices_invalid_fails_initialisation_naming_the_value(value):
    from conftest import run_py

    p = run_py(_VISIBLE, {"ASCEND_RT_VISIBLE_DEVICES": value})
    assert p.returncode != 0
    assert p.stdout.splitlines()[0] == "0 0"  # counting does not raise, as torch.cuda's
    assert f"ASCEND_RT_VISIBLE_DEVICES must be a comma-separated list of distinct device ordinals in [0, 2), got '{value}'" in p.stderr


def test_device_properties_have_torch_npu_fields():
    props = torch.npu.get_device_properties(1)
    assert props.name == "NPU-SIM-1" and props.total_memory > 0
    assert props.cube_core_num == props.vector_core_num == props.multi_processor_count > 0
    assert props.L2_cache_size == 0
    assert len(str(props.uuid)) == 36 and len(props.uuid.bytes) == 16
    assert props.uuid == torch.npu.get_device_properties(1).uuid != torch.npu.get_device_properties(0).uuid
    for field in ("major", "minor", "is_multi_gpu_board", "is_integrated", "warp_size", "gcnArchName"):
        assert getattr(props, field) is None
    with pytest.raises(RuntimeError, match="Invalid device_index: 5"):
        torch.npu.get_device_properties(5)


def test_torch_backends_entry_point_autoloads(tmp_path):
    # The entry point setup.py installs, declared in a dist-info directory on
    # sys.path: importlib.metadata finds it as it finds an installed copy's.
    import os
    import re

    from conftest import PKG_ROOT, run_py

    setup_py = open(os.path.join(PKG_ROOT, "setup.py")).read()
    spec = re.search(r'"torch\.backends": \["([^"]+)"\]', setup_py).group(1)
    dist = tmp_path / "torch_npu_sim-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu_sim\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[torch.backends]\n{spec}\n")
    code = "import sys, torch; print('torch_npu' in sys.modules, hasattr(torch, 'npu'))"
    path = os.pathsep.join([str(tmp_path), PKG_ROOT])
    on = run_py(code, {"PYTHONPATH": path})
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["True", "True"]
    # Importing torch_npu first: its own `import torch` runs the autoload.
    first = run_py("import torch_npu, torch; print(torch.ones(1, device='npu').device)", {"PYTHONPATH": path})
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["npu:0"]
    off = run_py(code, {"PYTHONPATH": path, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "False"]


def test_accelerator_empty_host_cache_releases_pinned_memory():
    # Note [The pinned allocator is PyTorch's host allocator for npu]: this
    # crashed while no at::HostAllocator was registered for npu.
    p = torch.ones(1024).pin_memory()
    assert p.is_pinned()
    del p
    assert torch.npu.host_memory_stats()["allocated_bytes.current"] > 0  # cached
    torch.accelerator.empty_host_cache()
    assert torch.npu.host_memory_stats()["allocated_bytes.current"] == 0


def test_get_cann_version_is_not_known():
    from torch_npu.utils.collect_env import get_cann_version

    assert get_cann_version() == "not known" == torch_npu.utils.get_cann_version(module="CANN")
    with pytest.raises(TypeError, match="int"):
        get_cann_version(module=3)


def test_check_error_raises_npu_error_with_the_runtime_description():
    torch_npu.npu.check_error(0)  # success: nothing
    with pytest.raises(torch_npu.npu.NpuError, match=r"^out of memory .*\(2\)$") as info:
        torch_npu.npu.check_error(2)  # npuErrorMemoryAllocation, as cudaErrorMemoryAllocation
    assert info.value.code == 2 and isinstance(info.value, RuntimeError)
    rt = torch_npu.npu.npurt()
    status = rt.npuStreamDestroy(0)  # a real failing call: a NULL handle
    with pytest.raises(torch_npu.npu.NpuError, match=rf"\({status}\)$"):
        torch_npu.npu.check_error(status)
    assert rt.npuGetErrorName(status) == "npuErrorInvalidValue"
    for unknown in (-1, 1000, 2**31, -(2**40)):
        with pytest.raises(torch_npu.npu.NpuError, match=rf"^unrecognized error code \({unknown}\)$"):
            torch_npu.npu.check_error(unknown)
    for bad in ("2", 2.0, None, True):
        with pytest.raises(TypeError, match="check_error expects the int status"):
            torch_npu.npu.check_error(bad)


def test_utilization_is_the_cores_busy_share_over_the_last_second():
    # Note [Device utilization]: a stream kept busy (by _sleep kernels) for over a second keeps one of
    # the device's cores busy; torch_npu's call forms; a device out of range is torch_npu's
    # AssertionError.
    cores = torch.npu.get_device_properties(0).multi_processor_count
    s = torch.npu.Stream(device=0)
    with torch.npu.stream(s):
        for _ in range(12):
            torch_npu.npu._sleep(100_000_000)  # 100 ms each
        done = torch.npu.Event()
        done.record()
    done.synchronize()
    expected = 100 / cores
    for device in (None, 0, "npu:0", torch.device("npu", 0)):
        with torch.npu.device(0):
            assert expected - 5 <= torch_npu.npu.utilization(device) <= expected + 5
    assert torch.npu.utilization is torch_npu.npu.utilization
    for bad in (2, "npu:5"):
        with pytest.raises(AssertionError, match="Invalid device id"):
            torch_npu.npu.utilization(bad)


def test_accelerator_device_capability_lists_the_dtypes_npu_tensors_hold():
    dtypes = torch.accelerator.get_device_capability("npu:1")["supported_dtypes"]
    assert {torch.float32, torch.float64, torch.complex128, torch.bfloat16, torch.float8_e4m3fn,
            torch.uint64, torch.bool} <= dtypes
    assert not {torch.qint8, torch.quint8, torch.qint32} & dtypes  # no quantized npu backend
    # The claim holds: each listed dtype is made on npu and converts to and from float32.
    for dtype in dtypes:
        x = torch.zeros(3, dtype=dtype, device="npu")
        assert x.cpu().dtype is dtype
        if not dtype.is_complex:  # (float8_e8m0fnu has no zero: compare with CPU's)
            assert torch.equal(x.to(torch.float32).cpu(), torch.zeros(3, dtype=dtype).to(torch.float32))
    with pytest.raises(RuntimeError, match="Invalid device_index: 7"):
        torch.accelerator.get_device_capability("npu:7")
