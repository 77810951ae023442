"""torch_npu.utils.save_async (Note [What an asynchronous save captures] in
torch_npu/utils/_save_async.py): it saves what torch.save would have saved at the call,
without waiting for the device, and never leaves a partial or wrong file behind.

Asynchrony is proved with a stream gate: the call returns while the work that computes the
tensors is held back, and the file then holds that work's results.
"""
import copy
import ctypes
import io
import os

import pytest
import torch
import torch_npu

from conftest import load_npurt

npu = torch_npu.npu
save_async = torch_npu.utils.save_async


def test_the_file_holds_the_tensors_as_of_the_call_on_their_device(tmp_path):
    x = torch.arange(8.0, device="npu")
    path = tmp_path / "snapshot.pt"
    done = save_async({"x": x, "view": x[2:5], "step": 3, "cpu": torch.ones(2)}, str(path))
    x.add_(100)  # queued after the save's copies: must not reach the file
    assert done.result(timeout=60) is None
    loaded = torch.load(path, weights_only=True)
    assert loaded["x"].device == torch.device("npu:0")
    assert loaded["x"].cpu().tolist() == list(range(8))
    assert loaded["view"].cpu().tolist() == [2.0, 3.0, 4.0]
    # One storage, as torch.save writes it: the view still views x.
    assert loaded["view"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
    assert loaded["step"] == 3 and loaded["cpu"].tolist() == [1.0, 1.0]
    assert sorted(os.listdir(tmp_path)) == ["snapshot.pt"]  # no temporary file left


def test_the_call_returns_before_the_device_computed_what_it_saves(tmp_path, gate):
    x = torch.zeros(4, device="npu")
    with gate(npu.current_stream()):
        x.fill_(7.0)  # held behind the gate
        done = save_async(x, str(tmp_path / "late.pt"))
        assert not done.done() and not (tmp_path / "late.pt").exists()
    done.result(timeout=60)
    assert torch.load(tmp_path / "late.pt").cpu().tolist() == [7.0] * 4


def test_containers_changed_after_the_call_do_not_reach_the_file(tmp_path):
    state = {"epoch": 1, "losses": [0.5], "w": torch.ones(3, device="npu")}
    done = save_async(state, str(tmp_path / "state.pt"))
    state["epoch"] = 2
    state["losses"].append(0.25)
    state["w"].mul_(5)
    done.result(timeout=60)
    loaded = torch.load(tmp_path / "state.pt")
    assert loaded["epoch"] == 1 and loaded["losses"] == [0.5]
    assert loaded["w"].cpu().tolist() == [1.0] * 3


def test_checkpoints_of_a_training_loop_match_copies_taken_at_each_save(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data, target = torch.randn(32, 16, device="npu"), torch.randint(0, 4, (32,), device="npu")
    pending, expected = [], []
    for step in range(3):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()
        checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        expected.append(copy.deepcopy(checkpoint))
        pending.append(save_async(checkpoint, str(tmp_path / f"ckpt{step}.pt"), model=model))
        pending.append(save_async(model, str(tmp_path / f"model{step}.pt"), model=model))
    for future in pending:
        future.result(timeout=60)
    for step in range(3):
        loaded = torch.load(tmp_path / f"ckpt{step}.pt", weights_only=False)
        for key, value in expected[step]["model"].items():
            assert torch.equal(loaded["model"][key].cpu(), value.cpu()), key
        for index, state in expected[step]["optimizer"]["state"].items():
            assert torch.equal(loaded["optimizer"]["state"][index]["momentum_buffer"].cpu(),
                               state["momentum_buffer"].cpu())
        whole = torch.load(tmp_path / f"model{step}.pt", weights_only=False)
        for key, value in whole.state_dict().items():
            assert torch.equal(value.cpu(), expected[step]["model"][key].cpu()), key


def test_a_binary_file_object_receives_the_data(tmp_path):
    buffer = io.BytesIO()
    save_async([torch.full((2,), 3.0, device="npu")], buffer).result(timeout=60)
    buffer.seek(0)
    assert torch.load(buffer)[0].cpu().tolist() == [3.0, 3.0]


def test_bad_requests_raise_at_the_call_and_write_nothing(tmp_path):
    path = tmp_path / "never.pt"
    with pytest.raises(RuntimeError, match="zip format only"):
        save_async(torch.ones(1, device="npu"), str(path), _use_new_zipfile_serialization=False)
    x = torch.zeros(4, device="npu")
    with pytest.raises(RuntimeError, match="same data as different types"):
        save_async([x, x.view(torch.int32)], str(path))
    assert not path.exists()


def test_a_write_that_fails_reports_through_the_future_and_a_warning(tmp_path):
    missing = tmp_path / "no-such-dir" / "x.pt"
    with pytest.warns(RuntimeWarning, match="could not write"):
        done = save_async(torch.ones(2, device="npu"), str(missing))
        with pytest.raises(RuntimeError, match="no-such-dir does not exist"):
            done.result(timeout=60)
    assert not (tmp_path / "no-such-dir").exists()


def test_copies_discarded_by_a_failing_stream_write_no_file(tmp_path):
    x = torch.arange(4.0, device="npu")
    npu.synchronize()
    rt = load_npurt()
    rt.npuSetFaultInjection.argtypes = [ctypes.c_int, ctypes.c_uint64]
    path = tmp_path / "bad.pt"
    try:
        assert rt.npuSetFaultInjection(1, 1) == 0  # the next work task (the save's copy) fails
        with pytest.warns(RuntimeWarning, match="did not run"):
            done = save_async(x, str(path))
            with pytest.raises(RuntimeError, match="did not run: a failure of the stream"):
                done.result(timeout=60)
    finally:
        rt.npuSetFaultInjection(1, 0)
    with pytest.raises(RuntimeError, match="injected fault"):
        npu.synchronize()  # the stream's own failure, reported once, to the stream
    assert sorted(os.listdir(tmp_path)) == []
    save_async(x, str(path)).result(timeout=60)  # the stream works again
    assert torch.load(path).cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
