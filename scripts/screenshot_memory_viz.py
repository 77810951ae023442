#!/usr/bin/env python3
"""Screenshot the HTML page torch.cuda._memory_viz makes from a memory snapshot,
on a machine without internet access.

_memory_viz's pages (trace_plot, segment_plot) import PyTorch's MemoryViz.js
from a CDN, and MemoryViz.js imports d3 from another. This script serves the
page from a local directory instead: the page imports a local copy of
MemoryViz.js (``--memory-viz-js``: torch/utils/viz/MemoryViz.js from PyTorch's
source tree; the wheel does not ship it) whose d3 imports are pointed at a d3
v5 bundle loaded by a <script> tag (``--d3-js``; Debian: the node-d3 package),
then takes a screenshot with headless Chromium.

    python scripts/screenshot_memory_viz.py snapshot.pickle timeline.png \\
        --memory-viz-js ~/pytorch/torch/utils/viz/MemoryViz.js
"""

import argparse
import functools
import http.server
import os
import pickle
import re
import shutil
import subprocess
import tempfile
import threading

from torch.cuda import _memory_viz

_CDN_MODULE = "https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js"
# MemoryViz.js's five d3 imports, replaced by reads of the global d3 (a live
# object: d3.event must stay d3's own).
_D3_IMPORTS = re.compile(r'^import .* from "https://cdn\.skypack\.dev/d3[^"]*";\n', re.M)
_D3_GLOBAL = ("const d3 = window.d3;\n"
              "const {axisLeft, scaleLinear, zoom, zoomIdentity, brushX} = window.d3;\n")


def build_site(snapshot: dict, kind: str, memory_viz_js: str, d3_js: str, site: str) -> None:
    plot = {"trace": _memory_viz.trace_plot, "segment": _memory_viz.segment_plot}[kind]
    page = plot(snapshot)
    if _CDN_MODULE not in page:
        raise SystemExit("unexpected _memory_viz page: the MemoryViz.js import was not found")
    page = page.replace(_CDN_MODULE, "./MemoryViz.js")
    page = page.replace("<head>", '<head>\n<script src="d3.js"></script>', 1)
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(page)
    with open(memory_viz_js) as f:
        script = f.read()
    script, n = _D3_IMPORTS.subn("", script)
    if n != 5:
        raise SystemExit(f"expected MemoryViz.js's 5 d3 imports, found {n}")
    script = script.replace("'use strict';\n", "'use strict';\n" + _D3_GLOBAL, 1)
    with open(os.path.join(site, "MemoryViz.js"), "w") as f:
        f.write(script)
    shutil.copy(d3_js, os.path.join(site, "d3.js"))


def screenshot(site: str, output: str, width: int, height: int, chromium: str) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=site)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--virtual-time-budget=10000", f"--window-size={width},{height}",
                        f"--screenshot={os.path.abspath(output)}", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", help="pickle written by torch_npu.npu.memory._dump_snapshot")
    parser.add_argument("output", help="PNG to write")
    parser.add_argument("--memory-viz-js", required=True,
                        help="PyTorch's torch/utils/viz/MemoryViz.js")
    parser.add_argument("--d3-js", default="/usr/share/nodejs/d3/dist/d3.min.js",
                        help="a d3 v5 bundle (default: Debian's node-d3)")
    parser.add_argument("--kind", choices=["trace", "segment"], default="trace",
                        help="trace_plot (active memory timeline) or segment_plot")
    parser.add_argument("--size", default="1400x900", help="window size, WxH")
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()
    with open(args.snapshot, "rb") as f:
        snapshot = pickle.load(f)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as site:
        build_site(snapshot, args.kind, args.memory_viz_js, args.d3_js, site)
        screenshot(site, args.output, width, height, args.chromium)


if __name__ == "__main__":
    main()
