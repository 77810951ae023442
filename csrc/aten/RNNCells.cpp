// The fused LSTM and GRU cells (and their backward) for npu tensors: the
// kernels behind every nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell on npu.
//
// Note [RNN cells of npu tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Why: PyTorch's RNN front end (aten/src/ATen/native/RNN.cpp) composes
// lstm, gru, lstm_cell and gru_cell, for every layout (multi-layer,
// bidirectional, batch_first, packed sequences, projections), from one cell
// per time step. The cell computes the gate matmuls with ordinary ops and
// then, for CUDA, XPU and PrivateUse1 inputs, calls the fused pointwise ops
// _thnn_fused_lstm_cell / _thnn_fused_gru_cell; autograd differentiates those
// with _thnn_fused_lstm_cell_backward_impl / _thnn_fused_gru_cell_backward,
// or, when the backward itself is recorded (create_graph), with composite
// ops of ordinary kernels. The fused ops have CUDA kernels only, so on npu
// the generic op path found no CPU kernel to run: nn.LSTM failed as a task,
// nn.GRU too. RNN tanh/relu cells are composed of ordinary ops and worked.
//
// What: the four fused kernels are implemented here, each as ONE task of CPU
// pointwise math (Note [Kernels composed of CPU ops]), because that is the
// contract PyTorch's composite sets for a PrivateUse1 backend, as for CUDA.
// The alternative, registering PrivateUse1 kernels for lstm/gru/lstm_cell/
// gru_cell that take the unfused CPU path, was rejected: those ops are
// CompositeImplicitAutograd, so a PrivateUse1 kernel would hide them from
// autograd (AutogradPrivateUse1 kernels for each overload would be needed as
// well), the unfused cell is not reachable from outside RNN.cpp (it would be
// rewritten here, with every layout above), and it queues about ten tasks
// per time step and direction instead of one, with autograd saving each
// intermediate. With the fused kernels, the layouts, the double backward and
// the matmuls stay PyTorch's own, and only the pointwise cell math is ours.
//
// Contract between forward and backward: the `workspace` output is read only
// by our own backward kernels (the composite double-backward path recomputes
// from the gates). It keeps CUDA's layout anyway: LSTM [B, 4H] = the
// activated input, forget, cell and output gates; GRU [B, 5H] = reset gate,
// update gate, new gate, hx, and the hidden part of the new gate with its
// bias. Half and bfloat16 are computed in float and rounded into the outputs,
// as CUDA accumulates them.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "aten/HostMathTask.h"
#include "aten/OpLauncher.h"
#include "core/NPUException.h"
#include "core/NPUStream.h"

namespace c10_npu::aten {
namespace {

constexpr const char* kLstm = "aten::_thnn_fused_lstm_cell";
constexpr const char* kLstmBackward = "aten::_thnn_fused_lstm_cell_backward_impl";
constexpr const char* kGru = "aten::_thnn_fused_gru_cell";
constexpr const char* kGruBackward = "aten::_thnn_fused_gru_cell_backward";

at::Tensor orUndefined(const std::optional<at::Tensor>& t) { return t.value_or(at::Tensor()); }

// Checks the arguments of a fused cell with `gates` gates: input and hidden
// gates [B, gates * H], the previous state [B, H], optional biases
// [gates * H]. Returns H.
int64_t checkCell(const char* op, int64_t gates, const at::Tensor& inputGates,
                  const at::Tensor& hiddenGates, const at::Tensor& state,
                  const at::Tensor& inputBias, const at::Tensor& hiddenBias) {
  TORCH_CHECK(inputGates.dim() == 2 && inputGates.size(1) % gates == 0, op,
              ": expected input_gates of size [batch, ", gates,
              " * hidden_size], but got input_gates of size ", inputGates.sizes(),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(hiddenGates.sizes() == inputGates.sizes(), op,
              ": expected hidden_gates of the size of input_gates (", inputGates.sizes(),
              "), but got ", hiddenGates.sizes(), NPU_ERROR_SUFFIX);
  const int64_t hidden = inputGates.size(1) / gates;
  TORCH_CHECK(state.dim() == 2 && state.size(0) == inputGates.size(0) && state.size(1) == hidden,
              op, ": expected the previous state of size [", inputGates.size(0), ", ", hidden,
              "], but got ", state.sizes(), NPU_ERROR_SUFFIX);
  for (const at::Tensor* bias : {&inputBias, &hiddenBias}) {
    TORCH_CHECK(!bias->defined() || (bias->dim() == 1 && bias->size(0) == inputGates.size(1)), op,
                ": expected biases of size [", inputGates.size(1), "], but got ", bias->sizes(),
                NPU_ERROR_SUFFIX);
  }
  checkSameDtype(op,
                 {"input_gates", "hidden_gates", "the previous state", "input_bias", "hidden_bias"},
                 {inputGates, hiddenGates, state, inputBias, hiddenBias});
  return hidden;
}

at::Tensor emptyContiguous(c10::IntArrayRef sizes, const at::Tensor& like,
                           c10::DeviceIndex device) {
  return emptyNpu(sizes, c10::contiguous_strides(sizes), like.scalar_type(), device);
}

// Gates summed with their biases, in the wide type (inside tasks).
at::Tensor withBias(const at::Tensor& gates, const at::Tensor& bias) {
  return bias.defined() ? widened(gates) + widened(bias) : widened(gates);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCell(
    const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& cx,
    const std::optional<at::Tensor>& inputBiasOpt, const std::optional<at::Tensor>& hiddenBiasOpt) {
  const at::Tensor inputBias = orUndefined(inputBiasOpt);
  const at::Tensor hiddenBias = orUndefined(hiddenBiasOpt);
  const c10::DeviceIndex device =
      commonNpuDevice(kLstm, {inputGates, hiddenGates, cx, inputBias, hiddenBias});
  const int64_t hidden = checkCell(kLstm, 4, inputGates, hiddenGates, cx, inputBias, hiddenBias);
  const int64_t batch = inputGates.size(0);
  at::Tensor hy = emptyContiguous({batch, hidden}, inputGates, device);
  at::Tensor cy = emptyContiguous({batch, hidden}, inputGates, device);
  at::Tensor workspace = emptyContiguous({batch, 4 * hidden}, inputGates, device);
  if (hy.numel() == 0) return {hy, cy, workspace};
  launchHostMath(getCurrentNPUStream(device), kLstm,
                 {inputGates, hiddenGates, cx, inputBias, hiddenBias}, {hy, cy, workspace},
                 [](const HostTensors& in) -> HostTensors {
                   const at::Tensor gates = withBias(in[0], in[3]) + withBias(in[1], in[4]);
                   const auto chunks = gates.chunk(4, 1);
                   const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(),
                                    g = chunks[2].tanh(), o = chunks[3].sigmoid();
                   at::Tensor c = f * widened(in[2]) + i * g;
                   at::Tensor h = o * c.tanh();
                   return {std::move(h), std::move(c), at::cat({i, f, g, o}, 1)};
                 });
  return {hy, cy, workspace};
}

// d(loss)/d(gates) of an LSTM cell from its saved activations (inside tasks).
HostTensors lstmCellBackward(const HostTensors& in, bool hasBias) {
  const at::Tensor &gradHy = in[0], &gradCy = in[1];
  const at::Tensor cx = widened(in[2]), tcy = widened(in[3]).tanh();
  const auto gates = widened(in[4]).chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  // The gradient reaching cy: its own, plus the one through hy = o * tanh(cy).
  at::Tensor gradC = gradCy.defined() ? widened(gradCy) : at::zeros_like(tcy);
  at::Tensor gradO = at::zeros_like(tcy);
  if (gradHy.defined()) {
    gradC = gradC + widened(gradHy) * o * (1 - tcy * tcy);
    gradO = widened(gradHy) * tcy * o * (1 - o);
  }
  at::Tensor gradGates = at::cat(
      {gradC * g * i * (1 - i), gradC * cx * f * (1 - f), gradC * i * (1 - g * g), gradO}, 1);
  at::Tensor gradBias = hasBias ? gradGates.sum(0) : at::Tensor();
  at::Tensor gradCx = gradC * f;
  return {std::move(gradGates), std::move(gradCx), std::move(gradBias)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCellBackward(
    const std::optional<at::Tensor>& gradHyOpt, const std::optional<at::Tensor>& gradCyOpt,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool hasBias) {
  const at::Tensor gradHy = orUndefined(gradHyOpt);
  const at::Tensor gradCy = orUndefined(gradCyOpt);
  if (!gradHy.defined() && !gradCy.defined()) return {};  // nothing flows back
  const c10::DeviceIndex device =
      commonNpuDevice(kLstmBackward, {gradHy, gradCy, cx, cy, workspace});
  for (const at::Tensor* t : {&gradHy, &gradCy, &cy}) {
    TORCH_CHECK(!t->defined() || t->sizes() == cx.sizes(), kLstmBackward,
                ": expected grad_hy, grad_cy and cy of the size of cx (", cx.sizes(), "), but got ",
                t->sizes(), NPU_ERROR_SUFFIX);
  }
  TORCH_CHECK(cx.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == cx.size(0) &&
                  workspace.size(1) == 4 * cx.size(1),
              kLstmBackward, ": expected a workspace of size [", cx.size(0), ", 4 * ", cx.size(-1),
              "], but got ", workspace.sizes(), NPU_ERROR_SUFFIX);
  checkSameDtype(kLstmBackward, {"workspace", "grad_hy", "grad_cy", "cx", "cy"},
                 {workspace, gradHy, gradCy, cx, cy});
  at::Tensor gradGates = emptyContiguous(workspace.sizes(), workspace, device);
  at::Tensor gradCx = emptyContiguous(cx.sizes(), cx, device);
  at::Tensor gradBias =
      hasBias ? emptyContiguous({workspace.size(1)}, workspace, device) : at::Tensor();
  launchHostMath(getCurrentNPUStream(device), kLstmBackward, {gradHy, gradCy, cx, cy, workspace},
                 {gradGates, gradCx, gradBias},
                 [hasBias](const HostTensors& in) { return lstmCellBackward(in, hasBias); });
  return {gradGates, gradCx, gradBias};
}

std::tuple<at::Tensor, at::Tensor> fusedGruCell(const at::Tensor& inputGates,
                                                const at::Tensor& hiddenGates, const at::Tensor& hx,
                                                const std::optional<at::Tensor>& inputBiasOpt,
                                                const std::optional<at::Tensor>& hiddenBiasOpt) {
  const at::Tensor inputBias = orUndefined(inputBiasOpt);
  const at::Tensor hiddenBias = orUndefined(hiddenBiasOpt);
  const c10::DeviceIndex device =
      commonNpuDevice(kGru, {inputGates, hiddenGates, hx, inputBias, hiddenBias});
  const int64_t hidden = checkCell(kGru, 3, inputGates, hiddenGates, hx, inputBias, hiddenBias);
  const int64_t batch = inputGates.size(0);
  at::Tensor hy = emptyContiguous({batch, hidden}, inputGates, device);
  at::Tensor workspace = emptyContiguous({batch, 5 * hidden}, inputGates, device);
  if (hy.numel() == 0) return {hy, workspace};
  launchHostMath(getCurrentNPUStream(device), kGru,
                 {inputGates, hiddenGates, hx, inputBias, hiddenBias}, {hy, workspace},
                 [](const HostTensors& in) -> HostTensors {
                   const auto x = withBias(in[0], in[3]).chunk(3, 1);
                   const auto h = withBias(in[1], in[4]).chunk(3, 1);
                   const at::Tensor prev = widened(in[2]);
                   const at::Tensor r = (x[0] + h[0]).sigmoid(), z = (x[1] + h[1]).sigmoid();
                   const at::Tensor n = (x[2] + r * h[2]).tanh();
                   at::Tensor out = n + z * (prev - n);
                   return {std::move(out), at::cat({r, z, n, prev, h[2]}, 1)};
                 });
  return {hy, workspace};
}

// d(loss)/d(gates) and d(loss)/d(hx) of a GRU cell from its workspace
// (inside tasks).
HostTensors gruCellBackward(const HostTensors& in, bool hasBias) {
  const at::Tensor gradHy = widened(in[0]);
  const auto saved = widened(in[1]).chunk(5, 1);
  const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hx = saved[3], &hn = saved[4];
  const at::Tensor gradN = gradHy * (1 - z) * (1 - n * n);   // before the tanh
  const at::Tensor gradZ = gradHy * (hx - n) * z * (1 - z);  // before the sigmoid
  const at::Tensor gradR = gradN * hn * r * (1 - r);         // before the sigmoid
  at::Tensor gradInputGates = at::cat({gradR, gradZ, gradN}, 1);
  at::Tensor gradHiddenGates = at::cat({gradR, gradZ, gradN * r}, 1);
  at::Tensor gradHx = gradHy * z;
  at::Tensor gradInputBias = hasBias ? gradInputGates.sum(0) : at::Tensor();
  at::Tensor gradHiddenBias = hasBias ? gradHiddenGates.sum(0) : at::Tensor();
  return {std::move(gradInputGates), std::move(gradHiddenGates), std::move(gradHx),
          std::move(gradInputBias), std::move(gradHiddenBias)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedGruCellBackward(
    const at::Tensor& gradHy, const at::Tensor& workspace, bool hasBias) {
  const c10::DeviceIndex device = commonNpuDevice(kGruBackward, {gradHy, workspace});
  TORCH_CHECK(gradHy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == gradHy.size(0) &&
                  workspace.size(1) == 5 * gradHy.size(1),
              kGruBackward, ": expected grad_hy of size [batch, hidden_size] and a workspace of ",
              "size [batch, 5 * hidden_size], but got ", gradHy.sizes(), " and ", workspace.sizes(),
              NPU_ERROR_SUFFIX);
  checkSameDtype(kGruBackward, {"workspace", "grad_hy"}, {workspace, gradHy});
  const int64_t batch = gradHy.size(0), hidden = gradHy.size(1);
  at::Tensor gradInputGates = emptyContiguous({batch, 3 * hidden}, workspace, device);
  at::Tensor gradHiddenGates = emptyContiguous({batch, 3 * hidden}, workspace, device);
  at::Tensor gradHx = emptyContiguous({batch, hidden}, workspace, device);
  at::Tensor gradInputBias, gradHiddenBias;
  if (hasBias) {
    gradInputBias = emptyContiguous({3 * hidden}, workspace, device);
    gradHiddenBias = emptyContiguous({3 * hidden}, workspace, device);
  }
  launchHostMath(getCurrentNPUStream(device), kGruBackward, {gradHy, workspace},
                 {gradInputGates, gradHiddenGates, gradHx, gradInputBias, gradHiddenBias},
                 [hasBias](const HostTensors& in) { return gruCellBackward(in, hasBias); });
  return {gradInputGates, gradHiddenGates, gradHx, gradInputBias, gradHiddenBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", fusedLstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", fusedLstmCellBackward);
  m.impl("_thnn_fused_gru_cell", fusedGruCell);
  m.impl("_thnn_fused_gru_cell_backward", fusedGruCellBackward);
}

}  // namespace c10_npu::aten
