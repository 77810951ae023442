"""pytest plugin: the CI subset of the Python suite under ASan (scripts/sanitize.sh python-ci).

Deselects every test that starts another Python process: marked ``subprocess``, requesting the
``run_py`` fixture, or whose own source calls ``run_py``/``run_py_ok``, ``subprocess``,
``multiprocessing``, ``os.fork`` or ``sys.executable``. Under ASan each such interpreter imports
torch with the instrumented backend preloaded, 10-20 s apiece on a 2-core machine, and together
they take most of the full run's time; they test environment variables and process-level
behaviour (fork, exit, bad configuration) whose native code paths the in-process tests run too.
The whole suite, these included, runs under ``make sanitize-full``.

Tests that reach a subprocess only through a helper are kept (they are correct, just slower).
Load with ``-p pytest_inprocess_only`` and this directory on ``sys.path``.
"""

from __future__ import annotations

import inspect
import re

_STARTS_A_PROCESS = re.compile(r"\brun_py(_ok)?\b|\bsubprocess\b|\bmultiprocessing\b|\bos\.fork\b|\bsys\.executable\b")


def _starts_a_process(item) -> bool:
    if item.get_closest_marker("subprocess") is not None:
        return True
    if "run_py" in getattr(item, "fixturenames", ()):
        return True
    fn = getattr(item, "function", None)
    try:
        source = inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        source = ""
    return bool(_STARTS_A_PROCESS.search(source))


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        (drop if _starts_a_process(item) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
