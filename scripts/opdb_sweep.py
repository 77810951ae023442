#!/usr/bin/env python3
"""Sweep PyTorch's OpInfo database over the npu device: forward only, float32,
the first sample of each op, npu against CPU.

Not a test: a survey of what the generic op path (csrc/aten/AsyncFallback.cpp)
gets wrong. Ops run in chunks, each chunk in a fresh interpreter, so a crash
costs one chunk: the rest of that chunk is then re-run one op per interpreter
to name the op that crashed. Each op ends as one of

  ok          same values, shape and dtype as on CPU
  mismatch    a result differs from CPU (values, shape, dtype or type)
  npu-error   CPU succeeds, npu raises (the message's first line is kept)
  both-error  CPU raises too (the sample is not valid here): not a failure
  crash       the interpreter died (signal) or timed out
  skipped     no float32 support or no sample

Usage:  PYTHONPATH=$PWD .venv/bin/python scripts/opdb_sweep.py [--chunk N]
            [--limit N] [--sample K] [--only KEY ...] [--json FILE]
--sample K runs every K-th op only (bounded runs on slow machines).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

# Ops whose values are random by design: only shape and dtype are compared.
RANDOM_OPS = {
    "bernoulli", "multinomial", "normal", "uniform", "randn", "randn_like", "rand_like",
    "randint", "randint_like", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "empty", "empty_like",
    "new_empty", "new_empty_strided", "empty_strided", "empty_permuted", "cauchy", "exponential",
    "geometric", "log_normal", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "randperm",
}

CHILD = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch, torch_npu
from torch.testing._internal.common_methods_invocations import op_db

wanted = json.loads(sys.argv[1])
RANDOM_OPS = set(json.loads(sys.argv[2]))
by_key = {f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name: op
          for op in op_db}


def to(x, dev):
    if isinstance(x, torch.Tensor):
        return x.detach().to(dev)
    if isinstance(x, (list, tuple)):
        return type(x)(to(e, dev) for e in x)
    if isinstance(x, dict):
        # factories take the device as a keyword
        return {k: dev if k == "device" else to(v, dev) for k, v in x.items()}
    return x


def compare(a, b, path="out"):
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return f"{path}: {type(b).__name__} vs {type(a).__name__}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = compare(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{path}: npu gave {type(b).__name__}"
        if b.device.type != "npu":
            return f"{path}: result on {b.device}"
        if a.dtype != b.dtype:
            return f"{path}: dtype {b.dtype} vs {a.dtype}"
        if a.shape != b.shape:
            return f"{path}: shape {tuple(b.shape)} vs {tuple(a.shape)}"
        if a.layout != torch.strided:
            return None
        try:
            torch.testing.assert_close(b.cpu().resolve_conj().resolve_neg(),
                                       a.resolve_conj().resolve_neg(), atol=1e-3, rtol=1e-3,
                                       equal_nan=True)
        except AssertionError as e:
            lines = str(e).splitlines()
            return f"{path}: values ({lines[1] if len(lines) > 1 else ''})"
        return None
    if isinstance(a, float) and isinstance(b, float):
        close = a == b or abs(a - b) <= 1e-3 * max(1.0, abs(a)) or (a != a and b != b)
        return None if close else f"{path}: {b} vs {a}"
    return None if a == b else f"{path}: {b!r} vs {a!r}"


def first_line(e):
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:200] if s else ''}"


def emit(r):
    print(json.dumps(r), flush=True)


for key in wanted:
    op = by_key[key]
    result = {"op": key}
    try:
        if torch.float32 not in op.supported_dtypes("cpu"):
            emit({"op": key, "status": "skipped"})
            continue
        torch.manual_seed(0)
        sample = next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=False)), None)
        if sample is None:
            emit({"op": key, "status": "skipped"})
            continue
        emit({"op": key, "status": "started"})
        try:
            torch.manual_seed(0)
            cpu = op(to(sample.input, "cpu"), *to(sample.args, "cpu"), **to(sample.kwargs, "cpu"))
            cpu_error = None
        except Exception as e:
            cpu_error = first_line(e)
        try:
            torch.manual_seed(0)
            npu = op(to(sample.input, "npu"), *to(sample.args, "npu"), **to(sample.kwargs, "npu"))
            torch.npu.synchronize()
        except Exception as e:
            result["status"] = "both-error" if cpu_error else "npu-error"
            result["detail"] = first_line(e)
        else:
            if cpu_error:
                result["status"] = "npu-error"
                result["detail"] = f"npu succeeded where CPU raised {cpu_error}"
            else:
                diff = compare(cpu, npu)
                if diff and "values" in diff and op.name in RANDOM_OPS:
                    diff = None  # cannot match CPU's random numbers
                result["status"] = "mismatch" if diff else "ok"
                if diff:
                    result["detail"] = diff
    except Exception as e:  # sample generation, comparison
        result["status"] = "sweep-error"
        result["detail"] = first_line(e)
    try:  # a held task failure must not be reported against the next op
        torch.npu.synchronize()
    except Exception:
        pass
    emit(result)
'''


def run_chunk(keys, timeout):
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(keys),
                            json.dumps(sorted(RANDOM_OPS))],
                           capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
        out, rc, err = p.stdout, p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, err = "timeout", ""
    results = {}
    for line in out.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("status") != "started":
            results[r["op"]] = r
    return results, rc, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunk", type=int, default=40)
    ap.add_argument("--limit", type=int, default=0, help="first N ops only")
    ap.add_argument("--sample", type=int, default=1, help="every K-th op only")
    ap.add_argument("--only", nargs="*", help="these op keys only")
    ap.add_argument("--timeout", type=float, default=600, help="per chunk, seconds")
    ap.add_argument("--json", help="write per-op results here")
    args = ap.parse_args()

    listing = subprocess.run(
        [sys.executable, "-c",
         "import json\nfrom torch.testing._internal.common_methods_invocations import op_db\n"
         "print(json.dumps([f'{o.name}.{o.variant_test_name}' if o.variant_test_name else o.name"
         " for o in op_db]))"], capture_output=True, text=True, check=True)
    keys = json.loads(listing.stdout.strip().splitlines()[-1])
    if args.only:
        keys = [k for k in keys if k in set(args.only)]
    keys = keys[::args.sample]
    if args.limit:
        keys = keys[:args.limit]
    start = time.time()
    results = {}
    for i in range(0, len(keys), args.chunk):
        chunk = keys[i:i + args.chunk]
        got, rc, _ = run_chunk(chunk, args.timeout)
        results.update(got)
        if rc != 0:
            # The interpreter died: run the ops without a result one at a time.
            for k in chunk:
                if k in got:
                    continue
                one, rc1, err1 = run_chunk([k], min(args.timeout, 120))
                if k in one:
                    results[k] = one[k]
                    continue
                how = f"signal {-rc1}" if isinstance(rc1, int) and rc1 < 0 else f"exit {rc1}"
                tail = (err1.strip().splitlines() or [""])[-1][:200]
                results[k] = {"op": k, "status": "crash", "detail": f"{how} {tail}".strip()}
        print(f"[{time.time() - start:6.0f}s] {min(i + args.chunk, len(keys))}/{len(keys)} ops",
              file=sys.stderr, flush=True)

    by_status = collections.defaultdict(list)
    for k in keys:
        by_status[results[k]["status"]].append(results[k])
    print(f"op_db sweep: {len(keys)} ops (every {args.sample}), {time.time() - start:.0f}s")
    for status in ("ok", "mismatch", "npu-error", "crash", "sweep-error", "both-error", "skipped"):
        print(f"  {status:11s} {len(by_status.get(status, []))}")
    for status in ("crash", "mismatch", "npu-error", "sweep-error"):
        rs = by_status.get(status, [])
        if not rs:
            continue
        print(f"\n== {status} ({len(rs)}) ==")
        # Grouped by message, with shapes and numbers taken out.
        groups = collections.defaultdict(list)
        for r in rs:
            groups[re.sub(r"\[[^\]]*\]|\d+", "#", r.get("detail", ""))[:160]].append(r["op"])
        for cause, ops in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(ops):3d}  {cause}\n       {', '.join(ops)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
