"""A test file written the torch_npu way (TestCase/run_tests from
torch_npu.testing.testcase), exercising every public stream/event function.

Runs unchanged under ``python tests/python/test_npu_style.py`` and under
pytest.
"""

import contextlib
import ctypes
import os
import subprocess
import sys
import threading

import torch

import torch_npu
from torch_npu.testing.testcase import TestCase, run_tests


class TestStreams(TestCase):

    def test_testcase_setup(self):
        self.assertEqual(self.npu_device, "npu:%s" % os.getenv("SET_NPU_DEVICE", "0"))
        torch.manual_seed(int(os.getenv("SEED", "666")))
        expected = torch.rand(3)
        self.setUp()
        self.assertEqual(torch.rand(3), expected)
        self.assertRtolEqual(torch.ones(3, device="npu") * 1.00001, torch.ones(3))
        self.assertEqual(torch.ones(2, device="npu"), torch.ones(2) + 1e-7, prec=1e-5)
        self.assertNotEqual(torch.ones(2), torch.zeros(2))

    def test_stream_init(self):
        seen = set()
        for i in range(torch.npu.device_count()):
            torch.npu.set_device(i)
            self.assertTrue(torch.npu.default_stream() == torch.npu.current_stream())
            seen.add(torch.npu.current_stream())
        torch.npu.set_device(0)
        self.assertEqual(len(seen), torch.npu.device_count())

    def test_priority(self):
        self.assertTrue((torch.npu.Stream().stream_id >> 5) == 3)
        self.assertTrue((torch.npu.Stream(priority=-1).stream_id >> 5) == 4)

    def test_stream_methods(self):
        s = torch.npu.Stream()
        other = torch.npu.Stream(priority=-1)
        with torch.npu.stream(s):
            x = torch.ones(64, device="npu") * 2
        e = s.record_event()
        other.wait_event(e)
        other.wait_stream(s)
        s.set_data_preprocess_stream(True)
        s.synchronize()
        self.assertTrue(s.query())
        self.assertEqual(x.sum().item(), 128)
        self.assertEqual(s._as_parameter_.value, s.npu_stream)
        with self.assertRaisesRegex(RuntimeError, "NPU dose not support Stream.get_priority"):
            s.priority

    def test_sync_launch_stream(self):
        s = torch_npu.npu.SyncLaunchStream()
        self.assertTrue(64 <= s.stream_id < 68)
        with torch.npu.stream(s):
            y = torch.ones(8, device="npu") + 1
        s.synchronize()
        self.assertEqual(y, torch.full((8,), 2.0))
        with self.assertRaises(RuntimeError):
            torch.npu.Stream(stream_id=s.stream_id + 4, device_index=s.device_index,
                             device_type=s.device_type)

    def test_reconstruct_and_fail_fast(self):
        s1 = torch.npu.Stream()
        s2 = torch.npu.Stream(stream_id=s1.stream_id, device_index=s1.device_index,
                              device_type=s1.device_type)
        self.assertEqual(s1, s2)
        for sid, idx, typ in ((99999, 0, 20), (0, 999, 20), (0, 0, 999)):
            with self.assertRaises(RuntimeError):
                torch.npu.Stream(stream_id=sid, device_index=idx, device_type=typ)
        for sid, idx, typ in ((0, -1, 20), (-1, 0, 20), (0, 0, -1)):
            with self.assertRaises((RuntimeError, OverflowError)):
                torch.npu.Stream(stream_id=sid, device_index=idx, device_type=typ)

    def test_set_stream_and_context(self):
        s = torch.npu.Stream()
        torch.npu.set_stream(s)
        self.assertEqual(torch.npu.current_stream(), s)
        torch.npu.set_stream(torch.npu.default_stream())
        ctx = torch_npu.npu.StreamContext(s)
        with ctx:
            self.assertEqual(torch.npu.current_stream(), s)
        self.assertEqual(torch.npu.current_stream(), torch.npu.default_stream())

    def test_synchronize(self):
        torch.npu.synchronize()
        torch.npu.synchronize(0)
        with self.assertRaisesRegex(ValueError, "Expected a npu device, but got: cpu"):
            torch.npu.synchronize("cpu")

    def test_device_functions(self):
        self.assertEqual(torch.npu.current_device(), 0)
        with torch.npu.device(0):
            self.assertEqual(torch.npu.current_device(), 0)
        t = torch.ones(1, device="npu:0")
        with torch.npu.device_of(t):
            self.assertEqual(torch.npu.current_device(), 0)
        self.assertTrue(isinstance(torch.npu.device_count(), int))

    def test_capturing_and_limits(self):
        self.assertFalse(torch.npu.is_current_stream_capturing())
        s = torch.npu.Stream()
        torch_npu.npu.set_stream_limit(s, 1, 1)
        self.assertEqual(torch_npu.npu.get_stream_limit(s), {"cube_core_num": 1, "vector_core_num": 1})
        torch_npu.npu.reset_stream_limit(s)

    def test_events(self):
        e = torch.npu.Event(enable_timing=True)
        self.assertEqual(repr(e), "<torch_npu.npu.Event uninitialized>")
        self.assertTrue(e.query())
        e.record()
        e2 = torch.npu.Event(enable_timing=True)
        torch.ones(16, device="npu").sum()
        e2.record()
        e2.wait()
        e2.synchronize()
        self.assertGreaterEqual(e.elapsed_time(e2), 0)
        self.assertGreater(e2.recorded_time(), 0)
        with self.assertRaises(RuntimeError):
            e.ipc_handle()
        with self.assertRaises(RuntimeError):
            torch.npu.Event.from_ipc_handle(0, b"")

    def test_external_event(self):
        s1, s2 = torch.npu.Stream(), torch.npu.Stream()
        ev = torch_npu.npu.ExternalEvent()
        ev.record(s1)
        ev.wait(s2)
        with self.assertRaisesRegex(RuntimeError, "External event: A single record operation"):
            ev.wait(s2)
        ev.reset(s2)
        torch.npu.synchronize()

    def test_erase_stream(self):
        s = torch.npu.Stream()
        t = torch.ones(32, device="npu")
        t.record_stream(s)
        torch_npu.erase_stream(t, s)

    def test_npurt(self):
        rt = torch_npu.npu.npurt()
        self.assertNotEqual(int(rt.npuStreamCreate(0)), 0)
        t = torch.ones(20)
        self.assertEqual(rt.npuHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0x10000000), 0)
        self.assertEqual(rt.npuHostUnregister(t.data_ptr()), 0)

    def test_threads(self):
        errors = []

        def work():
            try:
                s = torch.npu.Stream()
                with torch.npu.stream(s):
                    self.assertEqual(torch.npu.current_stream(), s)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        self.assertEqual(errors, [])


class TestExternalStream(TestCase):

    @contextlib.contextmanager
    def _get_external_stream(self, device=None):
        rt = torch_npu.npu.npurt()
        stream = ctypes.c_void_p(0)
        with torch_npu.npu.device(device):
            try:
                self.assertEqual(int(rt.npuStreamCreate(ctypes.addressof(stream))), 0)
                yield stream.value
            finally:
                if stream.value:
                    torch_npu.npu.synchronize()
                    self.assertEqual(int(rt.npuStreamDestroy(stream.value)), 0)

    def test_external_stream_creation(self):
        with self._get_external_stream() as stream_v:
            ext = torch_npu.npu.ExternalStream(stream_v)
            self.assertEqual(stream_v, ext.npu_stream)
            self.assertEqual(ext.device.index, torch_npu.npu.current_device())

    def test_external_stream_as_current_and_op(self):
        with self._get_external_stream() as stream_v:
            ext = torch_npu.npu.ExternalStream(stream_v)
            with torch_npu.npu.stream(ext):
                self.assertEqual(torch_npu.npu.current_stream().npu_stream, ext.npu_stream)
                x = torch.randn(10, device="npu")
                y = x + 1
            torch_npu.npu.synchronize()
            self.assertEqual(y.sum().item(), x.sum().item() + x.numel(), prec=1e-4)

    def test_external_stream_same_ptr_isinstance(self):
        with self._get_external_stream() as stream_v:
            a, b = torch_npu.npu.ExternalStream(stream_v), torch_npu.npu.ExternalStream(stream_v)
            self.assertEqual(a, b)
            self.assertIsInstance(a, torch_npu.npu.Stream)
            self.assertIsInstance(a, torch_npu.npu.ExternalStream)

    def test_external_stream_restrictions(self):
        with self._get_external_stream() as stream_v:
            ext = torch_npu.npu.ExternalStream(stream_v)
            with self.assertRaisesRegex(RuntimeError, "NPUStream::synchronize"):
                ext.synchronize()
            with self.assertRaisesRegex(RuntimeError, "Cannot query"):
                ext.query()
            for fn in (ext.record_event, lambda: ext.wait_stream(torch.npu.current_stream()),
                       lambda: torch.ones(2, device="npu").record_stream(ext),
                       lambda: torch_npu.npu.graph_task_group_begin(ext),
                       lambda: torch_npu.npu.graph_task_group_end(ext),
                       lambda: torch_npu.npu.graph_task_update_begin(ext, None),
                       lambda: torch_npu.npu.graph_task_update_end(ext),
                       lambda: torch_npu.npu.launch_callback(lambda: None, ext),
                       lambda: torch_npu.npu.subscribe_report(ext),
                       lambda: torch_npu.npu.unsubscribe_report(ext)):
                with self.assertRaisesRegex(RuntimeError, "torch_npu-managed stream"):
                    fn()
            with torch_npu.npu.stream(ext):
                for fn in (torch_npu.npu.NPUGraph().capture_begin, torch_npu.npu.NPUGraph().capture_end,
                           torch_npu.npu.super_kernel_scope_begin, torch_npu.npu.super_kernel_scope_end):
                    with self.assertRaisesRegex(RuntimeError, "External NPU stream is not supported"):
                        fn()

    def test_external_stream_full_mode(self):
        torch_npu.npu.set_external_stream_mode("full")
        try:
            self.assertEqual(torch_npu.npu.get_external_stream_mode(), "full")
            with self._get_external_stream() as stream_v:
                ext = torch_npu.npu.ExternalStream(stream_v)
                with torch_npu.npu.stream(ext):
                    y = torch.ones(4, device="npu") * 5
                ext.record_event().synchronize()
                ext.synchronize()
                self.assertTrue(ext.query())
                self.assertEqual(y, torch.full((4,), 5.0))
        finally:
            torch_npu.npu.set_external_stream_mode("compat")

    def test_external_stream_npu_stream_per_stream_queue_restriction(self):
        script = (
            "import ctypes\n"
            "import torch_npu\n"
            "rt = torch_npu.npu.npurt()\n"
            "stream = ctypes.c_void_p(0)\n"
            "assert int(rt.npuStreamCreate(ctypes.addressof(stream))) == 0\n"
            "ext = torch_npu.npu.ExternalStream(stream.value)\n"
            "try:\n"
            "    _ = ext.npu_stream\n"
            "    raise SystemExit('expected RuntimeError not raised')\n"
            "except RuntimeError as e:\n"
            "    assert 'not supported in NPUStream::stream()' in str(e), str(e)\n"
            "finally:\n"
            "    rt.npuStreamDestroy(stream.value)\n"
        )
        env = dict(os.environ, TASK_QUEUE_ENABLE="1", PER_STREAM_QUEUE="1")
        root = os.path.dirname(os.path.dirname(os.path.abspath(torch_npu.__file__)))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")

    def test_external_stream_drains_default_queue(self):
        with self._get_external_stream() as stream_v:
            ext = torch_npu.npu.ExternalStream(stream_v)
            x = torch.randn(100, device="npu")
            y = x + 1
            self.assertEqual(ext.npu_stream, stream_v)
            torch_npu.npu.synchronize()
            self.assertEqual(y, x + 1)


if __name__ == "__main__":
    run_tests()
