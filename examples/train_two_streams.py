"""Train a small MLP on the simulated NPU with two streams.

The main job of the project (``make demo``). A data stream prepares the next
batch (normalisation, noise, one-hot targets) while the compute stream runs
forward, backward and Adam on the current one. The streams are ordered with
events only: the compute stream waits for "batch ready", the data stream
waits for "batch consumed" before it overwrites a buffer (two buffers, so
preparation of batch i+1 overlaps training on batch i). The same model is
trained on the CPU from the same seed, and the losses are compared.
"""

import time
from typing import List, Tuple

import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401

STEPS = 200
BATCH = 256
FEATURES = 32
CLASSES = 4


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, CLASSES),
    )


def make_raw_data() -> Tuple[torch.Tensor, torch.Tensor]:
    """Raw samples and labels, generated on the host once."""
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 0.35
    labels = torch.randint(0, CLASSES, (STEPS, BATCH), generator=g)
    samples = centers[labels] + torch.randn(STEPS, BATCH, FEATURES, generator=g)
    return samples, labels


def prepare(raw: torch.Tensor) -> torch.Tensor:
    """The per-batch preprocessing both runs apply: standardise the features."""
    return (raw - raw.mean(dim=0, keepdim=True)) / (raw.std(dim=0, keepdim=True) + 1e-5)


def train_cpu(samples: torch.Tensor, labels: torch.Tensor) -> Tuple[List[float], float]:
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    t0 = time.perf_counter()
    for step in range(STEPS):
        loss = F.cross_entropy(model(prepare(samples[step])), labels[step])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(x) for x in losses], time.perf_counter() - t0


def train_npu(samples: torch.Tensor, labels: torch.Tensor) -> Tuple[List[float], float]:
    model = make_model().npu()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    compute = torch.npu.current_stream()
    data = torch.npu.Stream()
    host_x = samples.pin_memory()
    host_y = labels.pin_memory()
    buffers = [torch.empty(BATCH, FEATURES, device="npu") for _ in range(2)]
    targets = [torch.empty(BATCH, dtype=torch.long, device="npu") for _ in range(2)]
    ready = [torch.npu.Event() for _ in range(2)]
    consumed = [torch.npu.Event() for _ in range(2)]

    def stage(step: int) -> None:
        slot = step % 2
        with torch.npu.stream(data):
            data.wait_event(consumed[slot])  # never overwrite a batch still in use
            raw = host_x[step].to("npu", non_blocking=True)
            buffers[slot].copy_(prepare(raw))
            targets[slot].copy_(host_y[step].to("npu", non_blocking=True))
            ready[slot].record(data)

    losses = []
    t0 = time.perf_counter()
    stage(0)
    for step in range(STEPS):
        slot = step % 2
        if step + 1 < STEPS:
            stage(step + 1)  # overlaps with the compute below
        compute.wait_event(ready[slot])
        loss = F.cross_entropy(model(buffers[slot]), targets[slot])
        opt.zero_grad()
        loss.backward()
        opt.step()
        consumed[slot].record(compute)
        losses.append(loss.detach())
    host_losses = [float(x) for x in torch.stack(losses).cpu()]  # one host read at the end
    return host_losses, time.perf_counter() - t0


def main() -> None:
    samples, labels = make_raw_data()
    cpu_losses, cpu_time = train_cpu(samples, labels)
    npu_losses, npu_time = train_npu(samples, labels)
    print(f"MLP {FEATURES}-64-64-{CLASSES}, Adam, {STEPS} steps of {BATCH} samples")
    print(f"{'step':>6} {'cpu loss':>10} {'npu loss':>10}")
    for step in list(range(0, STEPS, 40)) + [STEPS - 1]:
        print(f"{step:>6} {cpu_losses[step]:>10.5f} {npu_losses[step]:>10.5f}")
    diff = max(abs(a - b) for a, b in zip(cpu_losses, npu_losses))
    print(f"time: cpu {cpu_time:.2f} s, npu {npu_time:.2f} s (two streams, events only)")
    print(f"largest loss difference cpu vs npu: {diff:.2e}")
    if diff > 1e-3 or not npu_losses[-1] < npu_losses[0]:
        raise SystemExit("npu training diverged from cpu")


if __name__ == "__main__":
    main()
