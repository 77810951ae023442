"""The profiler: Kineto's PrivateUse1 device rows, key_averages device times,
npu memory events (profile_memory=True), the legacy profiler's stubs
(profile(use_device="npu")) and torch_npu.profiler.

The device activities come from csrc/profiler (NPUActivityProfiler); each test
checks what a user sees: the Chrome trace's rows and events, the tables'
device times, the correlation of device work with the CPU op that queued it.
"""

import ctypes
import json
import os

import pytest
import torch
from torch.profiler import ProfilerActivity

import torch_npu
import torch_npu.profiler

_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _npurt_stream_id(npurt, stream) -> int:
    out = ctypes.c_uint64()
    npurt.npuStreamGetId.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    assert npurt.npuStreamGetId(ctypes.c_void_p(stream.npu_stream), ctypes.byref(out)) == 0
    return out.value


def _trace(prof, tmp_path):
    path = os.path.join(tmp_path, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)["traceEvents"]


def _device_events(events, name_prefix=""):
    return [e for e in events
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e["name"].startswith(name_prefix)]


def test_device_rows_per_stream(tmp_path, npurt):
    s1 = torch_npu.npu.Stream()
    s2 = torch_npu.npu.Stream()
    x = torch.ones(64, 64, device="npu")
    torch_npu.npu.synchronize()
    with torch.profiler.profile(activities=_ACTIVITIES) as prof:
        with torch_npu.npu.stream(s1):
            a = x.mul(2)
        with torch_npu.npu.stream(s2):
            b = x.sub(1)
        torch_npu.npu.synchronize()
    events = _trace(prof, tmp_path)
    muls = _device_events(events, "aten::mul")
    subs = _device_events(events, "aten::sub")
    assert muls and subs, sorted({e["name"] for e in _device_events(events)})
    id1, id2 = _npurt_stream_id(npurt, s1), _npurt_stream_id(npurt, s2)
    assert {(e["pid"], e["tid"]) for e in muls} == {(0, id1)}
    assert {(e["pid"], e["tid"]) for e in subs} == {(0, id2)}
    # Every row is named after its stream.
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert names.get((0, id1)) == f"stream {id1}"
    assert names.get((0, id2)) == f"stream {id2}"
    assert a.sum().item() == 2 * 64 * 64 and b.sum().item() == 0


def test_device_events_link_to_the_cpu_op_that_queued_them(tmp_path):
    x = torch.ones(8, device="npu")
    torch_npu.npu.synchronize()
    with torch.profiler.profile(activities=_ACTIVITIES) as prof:
        y = x.add(3)
        torch_npu.npu.synchronize()
    events = _trace(prof, tmp_path)
    cpu_ops = {e["args"]["External id"]: e for e in events
               if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    kernels = _device_events(events, "aten::add")
    assert kernels
    for k in kernels:
        assert k["args"]["correlation"] == k["args"]["External id"]
        linked = cpu_ops.get(k["args"]["External id"])
        assert linked is not None, k
        assert linked["name"] == "aten::add"
        assert linked["ts"] <= k["ts"], "the device runs the op after the host queued it"
    assert y[0].item() == 4


def test_copies_and_events_are_device_activities(tmp_path, gate):
    src = torch.arange(1024, dtype=torch.float32)
    s = torch_npu.npu.Stream()
    ev = torch_npu.npu.Event()
    with torch.profiler.profile(activities=_ACTIVITIES) as prof:
        d = src.to("npu")
        # The record cannot have completed when s waits for it (a wait for a
        # completed event is not queued at all).
        g = gate(torch_npu.npu.current_stream())
        ev.record()
        s.wait_event(ev)
        # The wait reaches npurt through the task queue; reading the raw
        # stream drains it, so the wait is submitted before the record can
        # complete (else it could find the record done, and not be queued).
        assert s.npu_stream
        g.release()
        torch_npu.npu.synchronize()
    events = _trace(prof, tmp_path)
    names = {e["name"] for e in _device_events(events)}
    assert any(n.startswith("aten::copy_") for n in names), names
    assert "npuEventRecord" in names and "npuStreamWaitEvent" in names, names
    kinds = {e["args"]["kind"] for e in _device_events(events)}
    assert {"event_record", "event_wait"} <= kinds
    assert torch.equal(d.cpu(), src)


def test_key_averages_report_device_time(run_py):
    # The delay knob makes every device task take at least 3 ms: a lower
    # bound the device time of matmul must show (device time, not host time).
    out = run_py("""
        import torch, torch_npu
        from torch.profiler import profile, ProfilerActivity
        x = torch.ones(32, 32, device="npu")
        torch.npu.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            for _ in range(3):
                y = torch.mm(x, x)
            torch.npu.synchronize()
        rows = [r for r in p.key_averages() if r.key == "aten::mm"]
        kernels = [r for r in rows if r.device_type == torch._C._autograd.DeviceType.PrivateUse1]
        ops = [r for r in rows if r.device_type == torch._C._autograd.DeviceType.CPU]
        print("KERNELS", kernels[0].count, kernels[0].device_time_total)
        print("OPS", ops[0].device_time_total)
        # Each CPU op carries its kernels' time.
        print("PER_OP", min(e.device_time_total for e in p.events()
                            if e.name == "aten::mm" and e.device_type == ops[0].device_type))
        print(p.key_averages().table(sort_by="device_time_total", row_limit=5))
    """, env={"NPU_SIM_TASK_DELAY_US": "3000"})
    assert out.returncode == 0, out.stderr
    values = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines()
              if ln.split() and ln.split()[0] in ("KERNELS", "OPS", "PER_OP")}
    assert int(values["KERNELS"][0]) == 3, out.stdout  # one device kernel per mm
    assert float(values["KERNELS"][1]) >= 3 * 3000, out.stdout
    assert float(values["OPS"][0]) >= 3 * 3000, out.stdout
    assert float(values["PER_OP"][0]) >= 3000, out.stdout
    assert "Self NPU" in out.stdout, out.stdout


def test_profile_memory_records_npu_allocations_and_frees():
    # Note [Allocations in the profiler]: every allocation and free reaches
    # the profiler as a memory event of the npu device.
    torch.npu.synchronize()
    with torch.profiler.profile(activities=_ACTIVITIES, profile_memory=True) as p:
        x = torch.empty(256 * 1024, device="npu")  # 1 MiB
        y = x + 1
        del y
    # Allocations inside an op count for the op; the free of y, outside any
    # op, is a "[memory]" row of its own.
    cpu = torch._C._autograd.DeviceType.CPU
    rows = {r.key: r for r in p.key_averages() if r.device_type == cpu}  # not the kernel rows
    assert rows["aten::empty"].self_device_memory_usage == 1 << 20
    assert rows["aten::add"].device_memory_usage == 1 << 20
    assert rows["[memory]"].device_memory_usage == -(1 << 20)
    assert all(r.cpu_memory_usage == 0 for r in rows.values() if r.key != "[memory]")
    table = p.key_averages().table(sort_by="self_device_memory_usage", row_limit=5)
    assert "Self NPU Mem" in table, table
    del x


def test_profile_memory_feeds_the_memory_profiler_and_viz():
    from torch.cuda._memory_viz import _profile_to_snapshot, profile_plot
    with torch.profiler.profile(activities=_ACTIVITIES, profile_memory=True, record_shapes=True,
                                with_stack=True) as p:
        x = torch.rand(128, 128, device="npu")
        x * x + x * x
    html = profile_plot(p)
    snapshot = _profile_to_snapshot(p)
    frames = json.dumps(snapshot)
    assert "test_profiler.py" in frames and "category" in frames
    npu_allocs = [t for trace in snapshot["device_traces"] for t in trace
                  if t["action"] == "alloc" and t["size"] == 128 * 128 * 4]
    assert npu_allocs, snapshot["device_traces"]
    assert "<html" in html.lower()
    del x


def test_profile_memory_off_reports_nothing():
    # Without profile_memory, and outside any profile, no memory event.
    with torch.profiler.profile(activities=_ACTIVITIES) as p:
        x = torch.empty(1024, device="npu")
        del x
    assert all(r.device_memory_usage == 0 for r in p.key_averages())
    assert "[memory]" not in {r.key for r in p.key_averages()}


def test_legacy_profiler_use_device_npu(run_py):
    out = run_py("""
        import torch, torch_npu
        x = torch.ones(16, 16, device="npu")
        torch.npu.synchronize()
        with torch.autograd.profiler.profile(use_device="npu") as p:
            y = torch.mm(x, x)
            torch.npu.synchronize()
        print("DEVICE", min(e.device_time_total for e in p.function_events if e.name == "aten::mm"))
    """, env={"NPU_SIM_TASK_DELAY_US": "2000"})
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("DEVICE")][0]
    assert float(line.split()[1]) >= 2000, out.stdout


def test_nothing_is_collected_outside_a_profile(tmp_path):
    x = torch.ones(4, device="npu")
    for _ in range(5):
        x = x + 1
    torch_npu.npu.synchronize()
    with torch.profiler.profile(activities=_ACTIVITIES) as prof:
        y = x * 2
        torch_npu.npu.synchronize()
    names = [e["name"] for e in _device_events(_trace(prof, tmp_path))]
    assert not any(n.startswith("aten::add") for n in names), names
    assert any(n.startswith("aten::mul") for n in names), names
    assert y[0].item() == 12


def test_cpu_only_profile_has_no_device_rows(tmp_path):
    x = torch.ones(4, device="npu")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        y = x + 1
        torch_npu.npu.synchronize()
    assert _device_events(_trace(prof, tmp_path)) == []
    assert y[0].item() == 2


def test_torch_npu_profiler_api(tmp_path):
    P = torch_npu.profiler
    assert P.ProfilerActivity.NPU == ProfilerActivity.PrivateUse1
    assert P.ProfilerActivity.CPU == ProfilerActivity.CPU
    assert P.supported_activities() == {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1}
    x = torch.ones(16, device="npu")
    out_dir = tmp_path / "tb"
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                   schedule=P.schedule(wait=0, warmup=1, active=1, repeat=1),
                   on_trace_ready=P.tensorboard_trace_handler(str(out_dir), worker_name="w")) as prof:
        for _ in range(2):  # warm-up step, then the recorded one
            y = x.mul(5)
            torch_npu.npu.synchronize()
            prof.step()
    files = [f for f in os.listdir(out_dir) if f.startswith("w.") and f.endswith(".pt.trace.json")]
    assert len(files) == 1, os.listdir(out_dir)
    with open(out_dir / files[0]) as f:
        events = json.load(f)["traceEvents"]
    assert _device_events(events, "aten::mul")
    assert y[0].item() == 5


def test_torch_npu_profiler_bad_arguments():
    P = torch_npu.profiler
    with pytest.raises(ValueError, match="unsupported activity"):
        P.profile(activities=[ProfilerActivity.CUDA])
    with pytest.raises(ValueError, match="must not be empty"):
        P.profile(activities=[])
    with pytest.raises(NotImplementedError, match="experimental_config"):
        P.profile(experimental_config=object())
    with pytest.raises(TypeError, match="dir_name"):
        P.tensorboard_trace_handler(dir_name=3)
    with pytest.warns(UserWarning, match="analyse_flag"):
        P.tensorboard_trace_handler(analyse_flag="yes")
