"""Whole models on npu train like on CPU: a small CNN (convolutions, batch
norm, pooling, linear), an LSTM and a GRU sequence model, and a Transformer
encoder layer. From the same initial weights, a few steps of forward,
backward and an optimizer step (SGD with momentum, Adam) give the CPU losses,
gradients, parameters and running statistics, and the trained model's eval
forward matches too. The work is asynchronous; every comparison reads the
results back, which waits for the stream."""

from __future__ import annotations

import copy
from typing import Callable, Dict, List

import pytest
import torch
import torch.nn as nn

# Several steps of float32 training accumulate rounding differences between
# CPU kernels run on the host and on the device executors (thread counts,
# oneDNN versus reference paths): tolerances are a little above the default.
TOL = dict(rtol=2e-4, atol=2e-5)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AvgPool2d(2),
        )
        self.head = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class SequenceClassifier(nn.Module):
    """A recurrent encoder (LSTM or GRU) and a linear head on its last state."""

    def __init__(self, rnn: type) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.rnn = rnn(8, 12, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(24, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out[:, -1])


class EncoderClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0,
                                                  batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(1))


def _cnn_batch(g: torch.Generator):
    return torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g)


def _tokens_batch(g: torch.Generator):
    return torch.randint(0, 20, (4, 7), generator=g), torch.randint(0, 3, (4,), generator=g)


def _encoder_batch(g: torch.Generator):
    return torch.randn(3, 6, 16, generator=g), torch.randint(0, 3, (3,), generator=g)


MODELS: Dict[str, tuple] = {
    "cnn": (SmallCNN, _cnn_batch),
    "lstm": (lambda: SequenceClassifier(nn.LSTM), _tokens_batch),
    "gru": (lambda: SequenceClassifier(nn.GRU), _tokens_batch),
    "transformer_encoder": (EncoderClassifier, _encoder_batch),
}
OPTIMIZERS: Dict[str, Callable] = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-2),
}


# Adam divides each gradient by its own running magnitude, so a parameter
# whose true gradient is zero moves by about lr per step in the direction of
# its rounding noise, which differs between any two implementations. The key
# bias of attention is one: softmax ignores what is added to every score of a
# row, and q . b_k is. Its Adam updates are compared with the scale of a step.
ZERO_GRADIENT = {"encoder.self_attn.in_proj_bias": slice(16, 32)}


def _assert_params_close(reference: nn.Module, model: nn.Module, adam: bool) -> None:
    for (n, p), (_, pn) in zip(reference.named_parameters(), model.named_parameters()):
        assert pn.device.type == "npu"
        p, pn = p.detach().clone(), pn.detach().cpu()
        if adam and n in ZERO_GRADIENT:
            noise = ZERO_GRADIENT[n]
            torch.testing.assert_close(pn[noise], p[noise], rtol=0, atol=0.05)
            p[noise] = pn[noise]
        torch.testing.assert_close(pn, p, **TOL, msg=lambda m: f"{n} after training: {m}")


def _train(model: nn.Module, batches: List[tuple], make_opt: Callable, device: str):
    """Trains `model` on `batches`; returns the losses and the gradients of
    the first step (before any update)."""
    model.to(device).train()
    opt = make_opt(model.parameters())
    losses, first_grads = [], None
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), first_grads


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_match_cpu(name, opt):
    make_model, make_batch = MODELS[name]
    torch.manual_seed(0)
    reference = make_model()
    model = copy.deepcopy(reference)  # the same initial weights
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(g) for _ in range(3)]

    losses, grads = _train(reference, batches, OPTIMIZERS[opt], "cpu")
    losses_n, grads_n = _train(model, batches, OPTIMIZERS[opt], "npu")

    torch.testing.assert_close(losses_n.cpu(), losses, **TOL)
    for n, grad in grads.items():
        assert grads_n[n].device.type == "npu"
        torch.testing.assert_close(grads_n[n].cpu(), grad, **TOL, msg=lambda m: f"grad of {n}: {m}")
    _assert_params_close(reference, model, adam=opt == "adam")
    for (n, b), (_, bn) in zip(reference.named_buffers(), model.named_buffers()):
        torch.testing.assert_close(bn.cpu(), b, **TOL, msg=lambda m: f"buffer {n}: {m}")

    x, _ = batches[0]
    reference.eval()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x.to("npu")).cpu(), reference(x), **TOL)


def test_training_on_a_side_stream_waits_with_an_event():
    """A training step queued on a side stream: an event recorded after the
    step tells when the parameters hold the result, and a stream that waits
    for the event reads them."""
    make_model, make_batch = MODELS["cnn"]
    torch.manual_seed(2)
    reference = make_model()
    model = copy.deepcopy(reference).to("npu")
    x, y = make_batch(torch.Generator().manual_seed(3))
    xn, yn = x.to("npu"), y.to("npu")
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())  # the copies above
    with torch.npu.stream(side):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xn), yn).backward()
        opt.step()
        done = torch.npu.Event()
        done.record()
    done.synchronize()
    assert done.query()

    opt_ref.zero_grad()
    nn.functional.cross_entropy(reference(x), y).backward()
    opt_ref.step()
    torch.npu.current_stream().wait_event(done)
    for p, pn in zip(reference.parameters(), model.parameters()):
        torch.testing.assert_close(pn.detach().cpu(), p.detach(), **TOL)
