"""Recurrent layers on npu tensors: nn.LSTM, nn.GRU and nn.RNN (tanh and
relu), their cells, every layout PyTorch's RNN front end composes from one
cell per step (multi-layer, bidirectional, batch_first, without bias, LSTM
projections, initial states, unbatched input, packed sequences) give the CPU
result in forward and backward, also in float64 and bfloat16 and under
double backward. LSTM and GRU cells run the fused cell kernels of
csrc/aten/RNNCells.cpp (Note [RNN cells of npu tensors]); their bad
arguments raise at the call."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import device_works

TOL = dict(rtol=1e-4, atol=1e-5)
KINDS = {
    "lstm": lambda **kw: nn.LSTM(**kw),
    "gru": lambda **kw: nn.GRU(**kw),
    "rnn_tanh": lambda **kw: nn.RNN(**kw),
    "rnn_relu": lambda **kw: nn.RNN(nonlinearity="relu", **kw),
}
LAYOUTS = {
    "plain": dict(),
    "two_layers_bidirectional": dict(num_layers=2, bidirectional=True),
    "batch_first": dict(batch_first=True),
    "no_bias": dict(bias=False),
    "all": dict(num_layers=3, bidirectional=True, batch_first=True),
}


def _loss(out, state):
    states = state if isinstance(state, tuple) else (state,)
    return out.square().sum() + sum((i + 2) * s.sum() for i, s in enumerate(states))


def _run(module, x, state=None, lengths=None):
    """Forward and backward of ``module`` on a fresh leaf copy of ``x``;
    returns the output, the final state and every gradient."""
    x = x.detach().clone().requires_grad_()
    if lengths is not None:
        packed = pack_padded_sequence(x, lengths, batch_first=module.batch_first, enforce_sorted=False)
        out, hidden = module(packed)
        out, _ = pad_packed_sequence(out, batch_first=module.batch_first)
    else:
        out, hidden = module(x) if state is None else module(x, state)
    _loss(out, hidden).backward()
    return out, hidden, [x.grad] + [p.grad for p in module.parameters()]


def _compare(module, x, state=None, lengths=None, tol=TOL, dtype=None):
    ref = copy.deepcopy(module)
    dut = copy.deepcopy(module).to("npu", dtype)
    dut_state = None
    if state is not None:
        dut_state = tuple(s.to("npu", dtype) for s in state) if isinstance(state, tuple) else state.to("npu", dtype)
    out, hidden, grads = _run(ref, x, state, lengths)
    out_n, hidden_n, grads_n = _run(dut, x.to("npu", dtype), dut_state, lengths)
    assert out_n.device.type == "npu"
    torch.testing.assert_close(out_n.cpu().to(out.dtype), out, **tol)
    hidden = hidden if isinstance(hidden, tuple) else (hidden,)
    hidden_n = hidden_n if isinstance(hidden_n, tuple) else (hidden_n,)
    for h, hn in zip(hidden, hidden_n):
        torch.testing.assert_close(hn.cpu().to(h.dtype), h, **tol)
    names = ["input"] + [n for n, _ in module.named_parameters()]
    for name, g, gn in zip(names, grads, grads_n):
        torch.testing.assert_close(gn.cpu().to(g.dtype), g, **tol, msg=lambda m: f"{name}: {m}")


def _input(layout, seq=5, batch=3, size=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, seq, size) if layout.get("batch_first") else (seq, batch, size)
    return torch.randn(shape, generator=g)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", list(KINDS))
def test_recurrent_layer_matches_cpu(kind, layout):
    torch.manual_seed(0)
    kw = LAYOUTS[layout]
    _compare(KINDS[kind](input_size=4, hidden_size=6, **kw), _input(kw))


@pytest.mark.parametrize("kind", list(KINDS))
def test_packed_sequences(kind):
    torch.manual_seed(1)
    kw = dict(num_layers=2, bidirectional=True, batch_first=True)
    _compare(KINDS[kind](input_size=4, hidden_size=5, **kw), _input(kw, seq=6, batch=4),
             lengths=torch.tensor([6, 2, 4, 1]))


@pytest.mark.parametrize("kind", list(KINDS))
def test_initial_state_and_unbatched_input(kind):
    torch.manual_seed(2)
    module = KINDS[kind](input_size=4, hidden_size=5, num_layers=2)
    g = torch.Generator().manual_seed(3)
    h0 = torch.randn(2, 3, 5, generator=g)
    state = (h0, torch.randn(2, 3, 5, generator=g)) if kind == "lstm" else h0
    _compare(module, _input({}), state=state)
    _compare(module, torch.randn(5, 4, generator=g))  # (seq, features): no batch


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_lstm_with_projections():
    torch.manual_seed(4)
    _compare(nn.LSTM(4, 6, proj_size=3, num_layers=2, bidirectional=True), _input({}))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, {}), (torch.bfloat16, dict(rtol=5e-2, atol=5e-2))])
def test_other_dtypes(kind, dtype, tol):
    """float64 against float64 on CPU; bfloat16 (computed in float inside
    the cells) against float on CPU."""
    torch.manual_seed(5)
    module = KINDS[kind](input_size=4, hidden_size=5)
    if dtype == torch.float64:
        _compare(module.double(), _input({}).double(), tol=tol)
    else:
        _compare(module, _input({}), tol=tol, dtype=dtype)


CELLS = {
    "lstm": lambda: nn.LSTMCell(4, 5),
    "gru": lambda: nn.GRUCell(4, 5),
    "rnn_tanh": lambda: nn.RNNCell(4, 5),
    "rnn_relu": lambda: nn.RNNCell(4, 5, nonlinearity="relu"),
    "lstm_no_bias": lambda: nn.LSTMCell(4, 5, bias=False),
    "gru_no_bias": lambda: nn.GRUCell(4, 5, bias=False),
}


def _cell_loss(out):
    return out[0].square().sum() + 3 * out[1].sum() if isinstance(out, tuple) else out.square().sum()


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
@pytest.mark.parametrize("name", list(CELLS))
def test_cell_matches_cpu(name, with_state, batched):
    torch.manual_seed(6)
    cell = CELLS[name]()
    g = torch.Generator().manual_seed(7)
    lead = (3,) if batched else ()
    x = torch.randn(*lead, 4, generator=g)
    state = None
    if with_state:
        h = torch.randn(*lead, 5, generator=g)
        state = (h, torch.randn(*lead, 5, generator=g)) if isinstance(cell, nn.LSTMCell) else h

    def run(module, device):
        xs = x.detach().to(device).requires_grad_()
        st = None if state is None else (tuple(s.to(device) for s in state) if isinstance(state, tuple)
                                         else state.to(device))
        out = module(xs, st)
        _cell_loss(out).backward()
        return out, [xs.grad] + [p.grad for p in module.parameters()]

    out, grads = run(cell, "cpu")
    out_n, grads_n = run(copy.deepcopy(cell).to("npu"), "npu")
    for o, on in zip(out if isinstance(out, tuple) else (out,), out_n if isinstance(out_n, tuple) else (out_n,)):
        torch.testing.assert_close(on.cpu(), o, **TOL)
    for gr, gn in zip(grads, grads_n):
        torch.testing.assert_close(gn.cpu(), gr, **TOL)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_cell_double_backward(name):
    """With create_graph the cells are differentiated by PyTorch's composite
    backward, itself differentiable."""
    torch.manual_seed(8)
    cell = CELLS[name]()
    x = torch.randn(2, 4)

    def penalty(module, device):
        xs = x.detach().to(device).requires_grad_()
        out = module(xs)
        out = out[0] if isinstance(out, tuple) else out
        (gx,) = torch.autograd.grad(out.square().sum(), xs, create_graph=True)
        p = gx.square().sum()
        p.backward()
        return p, [q.grad for q in module.parameters()]

    p, grads = penalty(cell, "cpu")
    pn, grads_n = penalty(copy.deepcopy(cell).to("npu"), "npu")
    torch.testing.assert_close(pn.cpu(), p, **TOL)
    for g, gn in zip(grads, grads_n):
        torch.testing.assert_close(gn.cpu(), g, **TOL)


class _OpLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind,fused", [
    ("lstm", {"aten._thnn_fused_lstm_cell", "aten._thnn_fused_lstm_cell_backward_impl"}),
    ("gru", {"aten._thnn_fused_gru_cell", "aten._thnn_fused_gru_cell_backward"}),
])
def test_lstm_and_gru_take_the_fused_cells(kind, fused):
    """The premise of Note [RNN cells of npu tensors]: PyTorch routes npu
    cells to the fused ops, and autograd (without create_graph) to their
    fused backward."""
    module = KINDS[kind](input_size=3, hidden_size=4).to("npu")
    with _OpLog() as log:
        out, _ = module(torch.randn(2, 2, 3, device="npu"))
        out.sum().backward()
    assert {op for op in log.ops if "_thnn_" in op} == fused


def test_lstm_runs_on_the_current_stream(gate):
    torch.manual_seed(9)
    ref = nn.LSTM(4, 5)
    dut = copy.deepcopy(ref).to("npu")
    x = _input({})
    xn = x.to("npu")
    s = torch.npu.Stream()
    torch.npu.synchronize()
    g = gate(s)
    with torch.npu.stream(s):
        out, (h, c) = dut(xn)  # every step is queued behind the gate
        done = torch.npu.Event()
        done.record()
    assert out.shape == (5, 3, 5)
    assert not done.query()
    g.release()
    done.synchronize()
    expected, (eh, ec) = ref(x)
    torch.testing.assert_close(out.cpu(), expected, **TOL)
    torch.testing.assert_close(c.cpu(), ec, **TOL)


def _npu(*size, dtype=torch.float32):
    return torch.randn(*size, dtype=dtype, device="npu")


BAD_CELL_CALLS = [
    (lambda: torch.ops.aten._thnn_fused_lstm_cell(_npu(2, 8), _npu(2, 8), _npu(2, 3)),
     r"_thnn_fused_lstm_cell: expected the previous state of size \[2, 2\], but got \[2, 3\]"),
    (lambda: torch.ops.aten._thnn_fused_lstm_cell(_npu(2, 7), _npu(2, 7), _npu(2, 3)),
     r"expected input_gates of size \[batch, 4 \* hidden_size\]"),
    (lambda: torch.ops.aten._thnn_fused_lstm_cell(_npu(2, 8), _npu(3, 8), _npu(2, 2)),
     r"expected hidden_gates of the size of input_gates"),
    (lambda: torch.ops.aten._thnn_fused_gru_cell(_npu(2, 9), _npu(2, 9), _npu(2, 3), _npu(6)),
     r"_thnn_fused_gru_cell: expected biases of size \[9\], but got \[6\]"),
    (lambda: torch.ops.aten._thnn_fused_gru_cell(_npu(2, 9), _npu(2, 9), _npu(2, 3, dtype=torch.float64)),
     r"expected the previous state to have the dtype of input_gates \(Float\), but got Double"),
    (lambda: torch.ops.aten._thnn_fused_gru_cell(_npu(2, 9), torch.randn(2, 9), _npu(2, 3)),
     r"same device.*cpu and npu"),
    (lambda: torch.ops.aten._thnn_fused_gru_cell_backward(_npu(2, 3), _npu(2, 14), True),
     r"workspace of size \[batch, 5 \* hidden_size\]"),
    (lambda: nn.LSTM(4, 5).to("npu")(_npu(3, 2, 6)), r"input.size\(-1\) must be equal to input_size. Expected 4, got 6"),
    (lambda: nn.GRUCell(4, 5).to("npu")(_npu(3, 4), _npu(2, 5)), r"Input batch size 3 doesn't match hidden0 batch size 2"),
]


@pytest.mark.parametrize("call,match", BAD_CELL_CALLS, ids=range(len(BAD_CELL_CALLS)))
def test_bad_cell_arguments_raise_at_the_call(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()
    torch.npu.current_stream().synchronize()  # nothing was queued that fails later
    device_works(0)
