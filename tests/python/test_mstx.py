"""torch_npu.npu.mstx (Note [Markers on the simulator] in csrc/profiler/Mstx.h): marks and
ranges reach torch.profiler on the host, and given a stream also the stream's row of the
profile, in stream order; bad arguments warn and never raise.
"""
import threading
import warnings

import pytest
import torch
import torch_npu
from torch.profiler import ProfilerActivity, profile

npu = torch_npu.npu
mstx = torch_npu.npu.mstx


def _profile(body):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        body()
        npu.synchronize()
    return list(prof.events())


def _named(events, name):
    found = [e for e in events if e.name == name]
    assert found, (name, sorted({e.name for e in events}))
    return found[0]


def test_host_marks_and_ranges_are_profiler_annotations():
    def body():
        mstx.mark("checkpoint")
        rid = mstx.range_start("forward")
        (torch.ones(64, device="npu") * 2).sum()
        mstx.range_end(rid)
        mstx.mark("io done", domain="io")

    events = _profile(body)
    forward = _named(events, "forward")
    mul = _named(events, "aten::mul")
    assert forward.device_type == torch.autograd.DeviceType.CPU
    assert forward.time_range.start <= mul.time_range.start <= mul.time_range.end <= forward.time_range.end
    assert _named(events, "checkpoint").time_range.elapsed_us() < 1000
    _named(events, "io: io done")  # another domain than "default" names itself


def test_stream_marks_fall_in_the_streams_work_in_order():
    side = npu.Stream()
    x = torch.ones(256, device="npu")
    side.wait_stream(npu.current_stream())  # x is filled on the current stream

    def body():
        rid = mstx.range_start("step", stream=side)
        with npu.stream(side):
            x.mul_(3)
        mstx.mark("after mul", stream=side)
        mstx.range_end(rid)

    events = _profile(body)
    device = [e for e in events if e.device_type != torch.autograd.DeviceType.CPU]
    order = [e.name for e in sorted(device, key=lambda e: e.time_range.start)
             if e.name.startswith("mstx") or e.name == "aten::mul_"]
    assert order == ["mstx: step (start)", "aten::mul_", "mstx: after mul", "mstx: step (end)"]
    assert x.cpu().tolist() == [3.0] * 256  # markers change nothing


def test_push_and_pop_nest_per_domain_and_per_thread():
    assert mstx.range_push("a") == 0
    assert mstx.range_push("b") == 1
    assert mstx.range_push("x", domain="other") == 0
    seen = []
    worker = threading.Thread(target=lambda: seen.extend([mstx.range_push("t"), mstx.range_pop(),
                                                           mstx.range_pop()]))
    worker.start()
    worker.join()
    assert seen == [0, 0, -1]  # the worker's stack is its own
    assert mstx.range_pop() == 1
    assert mstx.range_pop("other") == 0
    assert mstx.range_pop() == 0
    assert mstx.range_pop() == -1


def test_a_range_ends_once_and_may_end_on_another_thread():
    rid = mstx.range_start("long", stream=npu.current_stream())
    later = mstx.range_start("next")
    assert 0 < rid < later
    mstx.range_end(later)
    ender = threading.Thread(target=mstx.range_end, args=(rid,))
    ender.start()
    ender.join()
    mstx.range_end(rid)  # the second end of an id does nothing
    mstx.range_end(10**15)  # nor does an id never returned
    npu.synchronize()


def test_annotate_as_context_manager_and_decorator():
    @mstx.annotate()
    def train_step():
        return torch.ones(2, device="npu").sum()

    def body():
        with mstx.annotate("epoch"):
            train_step()

        @mstx.mstx_range("eval")
        def evaluate():
            return 1

        assert evaluate() == 1

    names = {e.name for e in _profile(body)}
    assert {"epoch", "train_step", "eval"} <= names


def test_bad_arguments_warn_return_the_failure_value_and_never_raise():
    cases = [
        (lambda: mstx.mark(""), None),
        (lambda: mstx.mark(0), None),
        (lambda: mstx.mark("m", stream=1), None),
        (lambda: mstx.mark("m", domain=1), None),
        (lambda: mstx.range_start(""), 0),
        (lambda: mstx.range_start("r", stream="s"), 0),
        (lambda: mstx.range_start("r", domain=""), 0),
        (lambda: mstx.range_push(None), -1),
        (lambda: mstx.range_push("p", domain=2), -1),
        (lambda: mstx.range_pop(""), -1),
        (lambda: mstx.range_end("id"), None),
        # An npu stream whose id names no stream: the binding raises, the API warns.
        (lambda: mstx.mark("m", stream=torch.Stream(stream_id=12345, device_index=0,
                                                     device_type=npu.current_stream().device_type)),
         None),
    ]
    for call, failure in cases:
        with pytest.warns((UserWarning, RuntimeWarning)):
            assert call() == failure


def test_marks_inside_a_graph_capture_are_replayed_with_it():
    g = npu.NPUGraph()
    x = torch.zeros(4, device="npu")
    with npu.graph(g):
        mstx.mark("in graph", stream=npu.current_stream())
        x.add_(1)

    def body():
        g.replay()

    events = _profile(body)
    _named(events, "mstx: in graph")
    assert x.cpu().tolist() == [1.0] * 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mstx.mark("no warning for a valid mark")
