"""torch_npu's graph debugging ops print_npugraph_tensor / save_npugraph_tensor:
tensor contents at a point of a stream's work, at every replay when captured
(Note [Dumping tensors in stream order])."""

import os

import pytest
import torch
import torch_npu


def printed_values(text):
    """The tensors printed as 'name=tensor([...]), shape=..., dtype=...', as lists of floats."""
    values = []
    for chunk in text.split("name=tensor(")[1:]:
        body = chunk.split("), shape=")[0]
        values.append([float(v) for v in body.replace("[", " ").replace("]", " ").replace(",", " ").split()])
    return values


def test_print_runs_in_stream_order_eagerly(capsys):
    x = torch.zeros(3, device="npu")
    x.add_(1)
    torch_npu.print_npugraph_tensor(x, tensor_name="name")
    x.add_(1)  # queued after the print: not seen by it
    torch.npu.synchronize()
    out = capsys.readouterr().out
    assert printed_values(out) == [[1.0, 1.0, 1.0]]
    assert "shape=(3,), dtype=torch.float32" in out


def test_each_replay_prints_what_it_computed_even_when_replays_queue_up(capsys):
    x = torch.zeros(4, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x.add_(1)
        torch.ops.npu.print_npugraph_tensor(x, tensor_name="name")
        x.mul_(2)
    torch.npu.synchronize()
    assert capsys.readouterr().out == ""  # the capture printed nothing
    for _ in range(5):  # queued back to back: each reuses the op's one host buffer
        g.replay()
    torch.npu.synchronize()
    expected, value = [], 0.0
    for _ in range(5):
        value += 1
        expected.append([value] * 4)
        value *= 2
    assert printed_values(capsys.readouterr().out) == expected


def test_print_without_a_name_and_on_cpu(capsys):
    torch_npu.print_npugraph_tensor(torch.ones(2, dtype=torch.int32))  # CPU: printed at once
    assert capsys.readouterr().out.strip() == "tensor([1, 1], dtype=torch.int32), shape=(2,), dtype=torch.int32"
    with pytest.raises(RuntimeError, match="Expected a value of type 'Optional\\[str\\]' for argument 'tensor_name'"):
        torch.ops.npu.print_npugraph_tensor(torch.ones(2, device="npu"), tensor_name=3)


def test_save_names_files_by_torch_npus_rules_and_saves_every_replay(tmp_path):
    x = torch.arange(6, dtype=torch.float32, device="npu").reshape(2, 3)
    device = x.device.index if x.device.index is not None else torch.npu.current_device()
    path = str(tmp_path / "t.pt")
    first, second = torch.npu.NPUGraph(), torch.npu.NPUGraph()
    with torch.npu.graph(first):
        torch.ops.npu.save_npugraph_tensor(x, save_path=path)
    with torch.npu.graph(second):
        x.add_(10)
        torch.ops.npu.save_npugraph_tensor(x, save_path=path)  # the name's second save: _1
    first.replay()
    torch.npu.synchronize()
    assert torch.equal(torch.load(tmp_path / f"t_device_{device}_0.pt"), x.cpu())
    second.replay()
    second.replay()  # the same file again, with this replay's contents
    torch.npu.synchronize()
    assert torch.equal(torch.load(tmp_path / f"t_device_{device}_1.pt"), x.cpu())
    assert x.cpu()[0, 0].item() == 20.0

    torch_npu.save_npugraph_tensor(x, save_path=str(tmp_path / "o"), overwrite=True)
    torch_npu.save_npugraph_tensor([x, x.half()], save_path=str(tmp_path / "l.bin"))
    torch.npu.synchronize()
    assert torch.equal(torch.load(tmp_path / f"o_device_{device}.pt"), x.cpu())  # .pt added, no counter
    saved = torch.load(tmp_path / f"l_device_{device}_0.bin")
    assert [t.dtype for t in saved] == [torch.float32, torch.float16]
    assert all(not t.is_pinned() for t in saved)


def test_save_defaults_to_a_timestamped_name_and_cpu_saves_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch_npu.save_npugraph_tensor(torch.ones(2, device="npu"))
    torch_npu.save_npugraph_tensor(torch.ones(3), save_path="cpu.pt")  # no device in the name
    torch.npu.synchronize()
    names = sorted(os.listdir(tmp_path))
    assert names[0] == "cpu_0.pt" and names[1].startswith("tensor_") and "_device_" in names[1]
    assert torch.equal(torch.load(tmp_path / names[0]), torch.ones(3))


@pytest.mark.parametrize("bad, error, match", [
    ([], ValueError, "must not be empty"),
    ((torch.ones(1), 2), TypeError, "all elements in input tensor list must be Tensor"),
    ([torch.ones(1, device="npu:0"), torch.ones(1, device="npu:1")], ValueError, "on the same device"),
    ([torch.ones(1, device="npu"), torch.ones(1)], ValueError, "on the same device"),
])
def test_save_refuses_bad_tensor_lists(bad, error, match):
    with pytest.raises(error, match=match):
        torch_npu.save_npugraph_tensor(bad)


def test_save_refuses_a_path_without_a_file_name(tmp_path):
    with pytest.raises(ValueError, match="must include a file name"):
        torch_npu.save_npugraph_tensor(torch.ones(1, device="npu"), save_path=str(tmp_path) + os.sep)


def test_refused_on_an_external_stream_in_compat_mode_before_anything_is_queued(tmp_path):
    # Both are host callbacks, a row of torch_npu's external-stream table.
    from test_external_stream import raw_stream

    x = torch.ones(2, device="npu")
    with raw_stream() as ptr:
        with torch.npu.stream(torch.npu.ExternalStream(ptr)):
            with pytest.raises(RuntimeError, match="External NPU stream is not supported in print_npugraph_tensor"):
                torch_npu.print_npugraph_tensor(x)
            with pytest.raises(RuntimeError, match="External NPU stream is not supported in save_npugraph_tensor"):
                torch_npu.save_npugraph_tensor(x, save_path=str(tmp_path / "e.pt"))
    torch_npu.save_npugraph_tensor(x, save_path=str(tmp_path / "e.pt"))
    torch.npu.synchronize()
    device = torch.npu.current_device()
    assert os.listdir(tmp_path) == [f"e_device_{device}_0.pt"]  # the refused save took no name
