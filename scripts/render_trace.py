#!/usr/bin/env python3
"""Render a Chrome trace (torch.profiler's export_chrome_trace) as a
self-contained HTML/SVG timeline, one row per thread and per device stream.

Perfetto and chrome://tracing are not usable offline or headless, so the
profiler's picture in docs/DEBUGGING.md is made by this script and a headless
browser:

    python scripts/render_trace.py trace.json trace.html
    chromium --headless --screenshot=trace.png --window-size=1400,330 trace.html

Rows: every (pid, tid) lane with complete ("X") events, named by the trace's
process_name / thread_name metadata; CPU lanes first, then the device
lanes (processes whose events have a device category: kernel, gpu_memcpy,
gpu_memset). Each event is a bar (hover shows name and duration); a dashed
line joins each device event to the CPU op that queued it (same "External id").
"""

import argparse
import html
import json
from collections import defaultdict
from typing import Dict, List, Tuple

_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_COLORS = ["#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f",
           "#edc949", "#af7aa1", "#ff9da7", "#9c755f", "#bab0ab"]


def _color(name: str) -> str:
    return _COLORS[sum(map(ord, name)) % len(_COLORS)]


def render(trace: dict, title: str, width: int = 1360) -> str:
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    process_names: Dict[object, str] = {}
    thread_names: Dict[Tuple[object, object], str] = {}
    lanes: Dict[Tuple[object, object], List[dict]] = defaultdict(list)
    device_pids = set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            process_names[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X" and "dur" in e and e.get("cat") != "Trace":  # not the spans
            lanes[(e["pid"], e["tid"])].append(e)
            if e.get("cat") in _DEVICE_CATS:
                device_pids.add(e["pid"])
    if not lanes:
        raise SystemExit("no complete events in the trace")
    t0 = min(e["ts"] for lane in lanes.values() for e in lane)
    t1 = max(e["ts"] + e["dur"] for lane in lanes.values() for e in lane)
    span = max(t1 - t0, 1.0)
    label_w, row_h, top = 260, 26, 40
    scale = (width - label_w - 20) / span
    order = sorted(lanes, key=lambda k: (k[0] in device_pids, str(k[0]), str(k[1])))
    y_of = {k: top + i * (row_h + 6) for i, k in enumerate(order)}
    height = top + len(order) * (row_h + 6) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{html.escape(title)}</text>']
    # Time axis.
    for i in range(11):
        x = label_w + i * (width - label_w - 20) / 10
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 30}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 14}" text-anchor="middle">'
                   f'{span * i / 10 / 1000:.2f} ms</text>')
    for key in order:
        y = y_of[key]
        pid, tid = key
        proc = process_names.get(pid, f"pid {pid}")
        lane = thread_names.get(key, f"thread {tid}")
        is_dev = pid in device_pids
        out.append(f'<rect x="0" y="{y - 3}" width="{width}" height="{row_h + 6}" '
                   f'fill="{"#eef3fa" if is_dev else "#f7f7f7"}"/>')
        out.append(f'<text x="8" y="{y + row_h * 0.65:.1f}" font-weight="bold">'
                   f'{html.escape(proc[:14])} · {html.escape(lane[:26])}</text>')
        for e in lanes[key]:
            x = label_w + (e["ts"] - t0) * scale
            w = max(e["dur"] * scale, 1.0)
            tip = f'{e["name"]} ({e["dur"]:.1f} us)'
            # Event records and waits (the npu's args.kind) in grey: they are
            # not work, a wait is the stream being blocked.
            sync = e.get("args", {}).get("kind") in ("event_record", "event_wait")
            fill, ink = ("#d9d9d9", "#333") if sync else (_color(e["name"]), "white")
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_h}" '
                       f'fill="{fill}" stroke="#333" stroke-width="0.3">'
                       f'<title>{html.escape(tip)}</title></rect>')
            if w > 60:
                out.append(f'<text x="{x + 3:.1f}" y="{y + row_h * 0.65:.1f}" fill="{ink}">'
                           f'{html.escape(e["name"][: int(w / 6)])}</text>')
    # Links: a device event's "External id" names the CPU op that queued it.
    ops = {e["args"]["External id"]: e for lane in lanes.values() for e in lane
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    for key in order:
        if key[0] not in device_pids:
            continue
        for e in lanes[key]:
            op = ops.get(e.get("args", {}).get("External id"))
            if op is None or (op["pid"], op["tid"]) not in y_of:
                continue
            x1 = label_w + (op["ts"] - t0) * scale
            x2 = label_w + (e["ts"] - t0) * scale
            y1 = y_of[(op["pid"], op["tid"])] + row_h
            out.append(f'<line x1="{x1:.1f}" y1="{y1}" x2="{x2:.1f}" y2="{y_of[key]}" '
                       f'stroke="#555" stroke-width="0.7" stroke-dasharray="3,2"/>')
    out.append("</svg>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
            f"{html.escape(title)}</title></head><body style='margin:0;background:white'>"
            + "\n".join(out) + "</body></html>")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="Chrome trace JSON (export_chrome_trace)")
    parser.add_argument("output", help="HTML file to write")
    parser.add_argument("--title", default="torch.profiler trace with npu device rows")
    parser.add_argument("--width", type=int, default=1360)
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    with open(args.output, "w") as f:
        f.write(render(trace, args.title, args.width))


if __name__ == "__main__":
    main()
